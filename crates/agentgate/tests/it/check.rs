//! `agentgate check` against the emulators: every backend set up and
//! answering is `ok` with who the credentials are; a wrong AWS secret or
//! GitHub token is `FAIL` with the upstream's reason, and exit status 1;
//! an unset backend is `--` and does not fail the check.

use agentgate_sim::a2a::{A2aConfig, A2aSim};
use agentgate_sim::github::{GithubConfig, GithubSim};
use agentgate_sim::qbusiness::{OPERATOR_ARN, QBusinessConfig, QBusinessSim};
use agentgate_testkit::{Emulator, emulators};
use tokio::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_agentgate");

struct Upstreams {
    qbusiness: Emulator<QBusinessSim>,
    github: Emulator<GithubSim>,
    a2a: Emulator<A2aSim>,
}

/// `agentgate check` with the emulators' environment, `env` over it, and
/// a config naming the A2A agent; its exit status and stdout.
async fn check(up: &Upstreams, env: &[(&str, &str)]) -> (i32, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("agentgate.toml");
    std::fs::write(&config, up.a2a.a2a_agent("research", "")).expect("config");
    let store = format!("sqlite://{}", dir.path().join("tasks.db").display());
    let out = Command::new(BIN)
        .arg("--config")
        .arg(&config)
        .args(["check", "--store", &store])
        .env("HOME", dir.path())
        .envs(up.qbusiness.env())
        .envs(up.github.env())
        .envs(env.iter().copied())
        .output()
        .await
        .expect("run check");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

fn line<'a>(report: &'a str, what: &str) -> &'a str {
    report
        .lines()
        .find(|l| l.get(6..).is_some_and(|rest| rest.starts_with(what)))
        .unwrap_or_else(|| panic!("no `{what}` line in:\n{report}"))
}

#[tokio::test]
async fn check_says_who_each_credential_is_and_fails_on_a_wrong_one() {
    let up = Upstreams {
        qbusiness: emulators::qbusiness(QBusinessConfig::default())
            .start()
            .await,
        github: emulators::github(GithubConfig::default()).start().await,
        a2a: emulators::a2a(A2aConfig::default()).start().await,
    };

    let (status, report) = check(&up, &[]).await;
    assert_eq!(status, 0, "{report}");
    assert!(line(&report, "config").starts_with("ok"), "{report}");
    assert!(line(&report, "store").starts_with("ok"), "{report}");
    let q = line(&report, "qbusiness");
    assert!(q.starts_with("ok") && q.contains(OPERATOR_ARN), "{report}");
    let gh = line(&report, "copilot");
    assert!(
        gh.starts_with("ok") && gh.contains("@agentgate-user"),
        "{report}"
    );
    let a2a = line(&report, "a2a");
    assert!(
        a2a.starts_with("ok") && a2a.contains("cards read"),
        "{report}"
    );
    assert!(line(&report, "mcp").starts_with("--"), "{report}");

    // Wrong credentials: each named with the upstream's reason.
    let (status, report) = check(
        &up,
        &[
            ("AWS_SECRET_ACCESS_KEY", "not-the-secret"),
            ("GITHUB_PERSONAL_ACCESS_TOKEN", "ghp_wrongwrongwrong"),
        ],
    )
    .await;
    assert_eq!(status, 1, "{report}");
    let q = line(&report, "qbusiness");
    assert!(
        q.starts_with("FAIL")
            && q.contains("GetCallerIdentity: SignatureDoesNotMatch: The request signature")
            && !q.contains("ErrorMetadata"),
        "{report}"
    );
    let gh = line(&report, "copilot");
    assert!(
        gh.starts_with("FAIL") && gh.contains("did not accept the token"),
        "{report}"
    );

    // An unset backend is not a failure.
    let (status, report) = check(&up, &[("GITHUB_PERSONAL_ACCESS_TOKEN", "")]).await;
    assert_eq!(status, 0, "{report}");
    assert!(line(&report, "copilot").starts_with("--"), "{report}");
}
