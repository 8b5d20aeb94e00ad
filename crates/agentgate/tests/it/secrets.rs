//! Credentials stay secret: the real `agentgate serve`, given recognisable
//! AWS keys and a GitHub token, runs tasks that succeed and tasks that fail
//! because the credentials are wrong, with trace logging on. Then every
//! place a secret could leak to is searched for them: the server's log, the
//! task results the client got, and the bytes of the store's files. The
//! store's own secret (the MRTR signing key) is checked to be sealed, and
//! the database and key files to be readable by their owner only.

use std::path::Path;
use std::time::Duration;

use agentgate_sim::github::{GithubConfig, GithubSim};
use agentgate_sim::qbusiness::{QBusinessConfig, QBusinessSim};
use agentgate_testkit::{Emulator, Gate, GateBuilder, emulators};
use tokio::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_agentgate");

/// Recognisable, so a leak of any of them is found by a plain search.
const ACCESS_KEY_ID: &str = "AKIALEAKCANARY000001";
const SECRET_ACCESS_KEY: &str = "leakCanarySecretAccessKey/0123456789+abcd";
const GITHUB_TOKEN: &str = "ghp_leakCanaryGithubToken0123456789abcdef";
/// What the server is given when the test wants the upstream to refuse it.
const WRONG_SECRET: &str = "wrongCanarySecretAccessKey/0123456789+abcd";
const WRONG_TOKEN: &str = "ghp_wrongCanaryGithubToken0123456789abcde";

struct Upstreams {
    qbusiness: Emulator<QBusinessSim>,
    github: Emulator<GithubSim>,
}

async fn upstreams() -> Upstreams {
    let qbusiness = emulators::qbusiness(QBusinessConfig {
        access_key_id: ACCESS_KEY_ID.into(),
        secret_access_key: SECRET_ACCESS_KEY.into(),
        ..QBusinessConfig::default()
    })
    .start()
    .await;
    let github = emulators::github(GithubConfig {
        token: GITHUB_TOKEN.into(),
        time_scale: 0.05,
        ..GithubConfig::default()
    })
    .start()
    .await;
    Upstreams { qbusiness, github }
}

/// `agentgate serve` on `dir/tasks.db` with the given credentials and
/// trace logging (its stderr collected by the harness); returns the server
/// and its MCP URL.
async fn serve(up: &Upstreams, dir: &Path, secret: &str, token: &str) -> (Gate, String) {
    let server = GateBuilder::agentgate(BIN, dir)
        .upstream(&up.qbusiness)
        .upstream(&up.github)
        .env("RUST_LOG", "trace")
        .env("AWS_ACCESS_KEY_ID", ACCESS_KEY_ID)
        .env("AWS_SECRET_ACCESS_KEY", secret)
        .env("GITHUB_PERSONAL_ACCESS_TOKEN", token)
        .start()
        .await;
    let url = server.url.clone();
    (server, url)
}

/// `agentgate call --json` (a task-aware client following the task to its
/// end); returns everything it printed.
async fn call(dir: &Path, url: &str, tool: &str, args: &str) -> String {
    let out = Command::new(BIN)
        .args(["call", "--url", url, tool, "--args", args, "--json"])
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", dir)
        .env("AGENTGATE_CLIENT_STATE", dir.join("client-state"))
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(120), out)
        .await
        .expect("the client did not finish in 120 s")
        .expect("client output");
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Stops the server politely and returns everything it logged.
async fn stop(mut server: Gate) -> String {
    server.terminate();
    let (_, log) = server.wait_with_stderr().await;
    log
}

fn assert_no_secret(place: &str, haystack: &[u8]) {
    for secret in [SECRET_ACCESS_KEY, GITHUB_TOKEN, WRONG_SECRET, WRONG_TOKEN] {
        assert!(
            !haystack
                .windows(secret.len())
                .any(|w| w == secret.as_bytes()),
            "{place} contains the secret {secret}"
        );
    }
}

#[tokio::test]
async fn credentials_appear_in_no_log_result_or_store_file() {
    let up = upstreams().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut seen = String::new();

    // Right credentials: both tools do real work.
    let (server, url) = serve(&up, dir.path(), SECRET_ACCESS_KEY, GITHUB_TOKEN).await;
    let answer = call(
        dir.path(),
        &url,
        "QBusinessQueryTool",
        r#"{"query": "How do I set up the VPN?"}"#,
    )
    .await;
    assert!(answer.contains("conversationId"), "{answer}");
    let assigned = call(
        dir.path(),
        &url,
        "assign_copilot_to_issue",
        r#"{"owner": "acme", "repo": "widgets", "issue_number": 1}"#,
    )
    .await;
    assert!(assigned.contains("pull"), "{assigned}");
    seen.push_str(&answer);
    seen.push_str(&assigned);
    let log = stop(server).await;
    assert_no_secret("the server log (right credentials)", log.as_bytes());

    // Wrong credentials: the upstreams refuse, and the errors say so
    // without repeating what was sent.
    let (server, url) = serve(&up, dir.path(), WRONG_SECRET, WRONG_TOKEN).await;
    let refused = call(
        dir.path(),
        &url,
        "QBusinessQueryTool",
        r#"{"query": "vacation days"}"#,
    )
    .await;
    assert!(
        refused.to_lowercase().contains("signature"),
        "the AWS refusal is reported: {refused}"
    );
    let denied = call(
        dir.path(),
        &url,
        "assign_copilot_to_issue",
        r#"{"owner": "acme", "repo": "widgets", "issue_number": 2}"#,
    )
    .await;
    assert!(
        denied.contains("Bad credentials") || denied.contains("401"),
        "the GitHub refusal is reported: {denied}"
    );
    seen.push_str(&refused);
    seen.push_str(&denied);
    let log = stop(server).await;
    assert!(
        log.contains("DEBUG"),
        "trace logging was on, so the search below means something"
    );
    assert_no_secret("the server log (wrong credentials)", log.as_bytes());
    assert_no_secret("what the client was told", seen.as_bytes());

    // Every file the store wrote: the database, its WAL, the key file.
    let mut files = 0;
    for entry in std::fs::read_dir(dir.path()).expect("list") {
        let path = entry.expect("entry").path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name.starts_with("tasks.db") {
            assert_no_secret(
                &path.display().to_string(),
                &std::fs::read(&path).expect("read"),
            );
            files += 1;
        }
    }
    assert!(files >= 2, "the database and its key file were searched");
    assert_store_files_are_private(dir.path());
    assert_mrtr_key_is_sealed(&dir.path().join("tasks.db")).await;
}

#[cfg(unix)]
fn assert_store_files_are_private(dir: &Path) {
    use std::os::unix::fs::PermissionsExt as _;
    for name in ["tasks.db", "tasks.db.key"] {
        let mode = std::fs::metadata(dir.join(name))
            .expect("store file")
            .permissions()
            .mode();
        assert_eq!(mode & 0o077, 0, "{name} is readable by others: {mode:o}");
    }
}

#[cfg(not(unix))]
fn assert_store_files_are_private(_dir: &Path) {}

/// The `secrets` table holds the MRTR key sealed, not the raw 32 bytes.
async fn assert_mrtr_key_is_sealed(db: &Path) {
    use sqlx::Connection as _;
    let mut conn = sqlx::SqliteConnection::connect(&format!("sqlite://{}", db.display()))
        .await
        .expect("open the database");
    let value: Vec<u8> =
        sqlx::query_scalar("SELECT value FROM secrets WHERE name = 'mrtr-request-state'")
            .fetch_one(&mut conn)
            .await
            .expect("the MRTR key row");
    assert!(
        value.starts_with(b"agseal1:"),
        "the MRTR key is stored sealed ({} bytes)",
        value.len()
    );
}
