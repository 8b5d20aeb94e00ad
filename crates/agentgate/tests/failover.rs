//! Losing an instance on PostgreSQL: three real `agentgate serve` processes
//! share one database and both emulators; the one holding the most leases is
//! killed with SIGKILL mid-step. Every task still ends correctly, the dead
//! instance's tasks are taken over as soon as their leases run out, and no
//! step's upstream side effect happens twice (the emulators count them).
//!
//! Needs a PostgreSQL server (`AGENTGATE_TEST_POSTGRES_URL`, default
//! `postgres://postgres@127.0.0.1:5432/postgres`); without one the test says
//! on stderr that it skipped, unless `AGENTGATE_REQUIRE_POSTGRES=1`.

use std::collections::{BTreeMap, HashMap};
use std::io::Write as _;
use std::path::Path;
use std::process::Stdio;
use std::str::FromStr as _;
use std::time::Duration;

use agentgate_sim::github::seed::IssueSeed;
use agentgate_sim::github::{DEFAULT_GITHUB_TOKEN, GithubConfig, GithubSim, Seed};
use agentgate_sim::qbusiness::{
    DEFAULT_ACCESS_KEY_ID, DEFAULT_APPLICATION_ID, DEFAULT_REGION, DEFAULT_SECRET_ACCESS_KEY,
    QBusinessConfig, QBusinessSim,
};
use agentgate_testkit::*;
use rmcp::model::{GetTaskParams, TaskPayload};
use serde_json::json;
use sqlx::Connection as _;
use sqlx::postgres::{PgConnectOptions, PgConnection};
use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::process::{Child, Command};
use tokio_util::sync::CancellationToken;

const BIN: &str = env!("CARGO_BIN_EXE_agentgate");
const INSTANCES: usize = 3;
/// `[engine] lease_seconds`: the shortest lease the binary accepts.
const LEASE: Duration = Duration::from_secs(3);
/// The engine's longest sleep between looks at the store
/// (`EngineConfig::idle_poll`); a survivor wakes at a lease's expiry or
/// sooner, so this bounds how late it notices.
const IDLE_POLL: Duration = Duration::from_secs(1);
/// Every ChatSync answer arrives this long after Q Business acted on it, so
/// ChatSync steps are in flight when the instance dies, with their upstream
/// side effect already done: the repeated step must not do it again.
const CHATSYNC_LATENCY: Duration = Duration::from_secs(2);
/// The same for GitHub (an assignment step makes three requests).
const GITHUB_LATENCY: Duration = Duration::from_millis(400);
/// Slack for a loaded CI machine (two cores shared by three gateways, two
/// emulators, PostgreSQL and the test): claim queries, process scheduling.
const MARGIN: Duration = Duration::from_secs(2);
const QUESTIONS: usize = 24;
/// Issues Copilot is assigned to (numbers 101…).
const ISSUES: u64 = 6;

/// A fresh database on the test server, dropped at the end.
struct Database {
    admin: PgConnection,
    name: String,
    url: String,
}

impl Database {
    async fn create() -> Option<Self> {
        let server = std::env::var("AGENTGATE_TEST_POSTGRES_URL")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
        let options = PgConnectOptions::from_str(&server).expect("a PostgreSQL URL");
        let mut admin = match PgConnection::connect_with(&options).await {
            Ok(conn) => conn,
            Err(e) => {
                let shown = agentgate_core::store::redact_url(&server);
                let required = std::env::var("AGENTGATE_REQUIRE_POSTGRES").is_ok_and(|v| v == "1");
                assert!(
                    !required,
                    "PostgreSQL not reachable at {shown} ({e}), and AGENTGATE_REQUIRE_POSTGRES=1 \
                     requires it; run .ci/postgres.sh"
                );
                let _ = writeln!(
                    std::io::stderr(),
                    "skipped: PostgreSQL not reachable at {shown} ({e}); set \
                     AGENTGATE_TEST_POSTGRES_URL or run .ci/postgres.sh"
                );
                return None;
            }
        };
        let name = format!("agentgate_failover_{:016x}", rand::random::<u64>());
        sqlx::query(&format!("CREATE DATABASE {name}"))
            .execute(&mut admin)
            .await
            .expect("create database");
        let mut url = url::Url::parse(&server).expect("URL");
        url.set_path(&format!("/{name}"));
        Some(Self {
            admin,
            name,
            url: url.to_string(),
        })
    }

    async fn drop(mut self) {
        let _ = sqlx::query(&format!(
            "DROP DATABASE IF EXISTS {} WITH (FORCE)",
            self.name
        ))
        .execute(&mut self.admin)
        .await;
    }
}

/// One `agentgate serve` process and what it printed about itself.
struct Instance {
    child: Child,
    /// Its `/mcp` URL.
    url: String,
    /// Its name in `tasks.lease_owner`.
    worker: String,
}

struct Upstreams {
    qbusiness: QBusinessSim,
    q_url: String,
    github: GithubSim,
    gh_url: String,
}

async fn start_instance(db: &str, config: &Path, up: &Upstreams, home: &Path) -> Instance {
    let empty = home.join("aws-empty");
    std::fs::write(&empty, "").expect("write empty AWS config");
    let mut child = Command::new(BIN)
        .arg("--config")
        .arg(config)
        .args(["serve", "--listen", "127.0.0.1:0", "--store", db])
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("RUST_LOG", "warn")
        .env("AWS_CONFIG_FILE", &empty)
        .env("AWS_SHARED_CREDENTIALS_FILE", &empty)
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("AWS_ENDPOINT_URL_QBUSINESS", &up.q_url)
        .env("AWS_REGION", DEFAULT_REGION)
        .env("AWS_ACCESS_KEY_ID", DEFAULT_ACCESS_KEY_ID)
        .env("AWS_SECRET_ACCESS_KEY", DEFAULT_SECRET_ACCESS_KEY)
        .env("QBUSINESS_APPLICATION_ID", DEFAULT_APPLICATION_ID)
        .env("GITHUB_API_URL", &up.gh_url)
        .env("GITHUB_PERSONAL_ACCESS_TOKEN", DEFAULT_GITHUB_TOKEN)
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn agentgate");
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout).lines();
    let url = startup_line(&mut lines, "listening ").await;
    let worker = startup_line(&mut lines, "worker ").await;
    Instance { child, url, worker }
}

/// The next line of a starting instance's stdout, without its `prefix`.
async fn startup_line(
    lines: &mut tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    prefix: &str,
) -> String {
    let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .expect("agentgate did not start in 30s")
        .expect("stdout")
        .expect("agentgate exited while starting");
    line.strip_prefix(prefix)
        .unwrap_or_else(|| panic!("expected `{prefix}…`, got `{line}`"))
        .to_owned()
}

/// An upstream that acts on a request at once and answers `delay` later,
/// even if the caller is gone by then (the emulators' own latency comes
/// before the request is handled, so a caller killed during it would leave
/// no side effect to repeat).
fn answer_late(router: axum::Router, delay: Duration) -> axum::Router {
    router.layer(axum::middleware::from_fn(
        move |request: axum::extract::Request, next: axum::middleware::Next| async move {
            let handled = tokio::spawn(next.run(request));
            tokio::time::sleep(delay).await;
            handled.await.expect("emulator handler panicked")
        },
    ))
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

fn ms(duration: Duration) -> i64 {
    duration.as_millis() as i64
}

#[tokio::test]
async fn sigkill_of_the_busiest_instance_loses_no_task_and_repeats_no_side_effect() {
    let Some(db) = Database::create().await else {
        return;
    };
    let stop = CancellationToken::new();
    let _stop = stop.clone().drop_guard();
    let qbusiness = QBusinessSim::new(QBusinessConfig::default());
    let q_listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let q_url = format!("http://{}", q_listener.local_addr().expect("addr"));
    tokio::spawn(agentgate_sim::qbusiness::serve(
        q_listener,
        answer_late(qbusiness.router(), CHATSYNC_LATENCY),
        stop.clone(),
    ));
    let mut seed = Seed::default();
    let widgets = seed
        .repositories
        .iter_mut()
        .find(|r| r.owner == "acme" && r.name == "widgets")
        .expect("the default seed has acme/widgets");
    for n in 101..101 + ISSUES {
        widgets.issues.push(IssueSeed {
            number: Some(n),
            title: format!("Failover issue {n}"),
            body: "Seeded by the failover test.".into(),
            ..IssueSeed::default()
        });
    }
    let github = GithubSim::new(GithubConfig {
        time_scale: 0.1,
        seed,
        ..GithubConfig::default()
    });
    let gh_listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let gh_url = format!("http://{}", gh_listener.local_addr().expect("addr"));
    tokio::spawn(agentgate_sim::github::serve(
        gh_listener,
        answer_late(github.router(), GITHUB_LATENCY),
        stop.clone(),
    ));
    let up = Upstreams {
        qbusiness,
        q_url,
        github,
        gh_url,
    };

    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("agentgate.toml");
    std::fs::write(
        &config,
        format!("[engine]\nlease_seconds = {}\n", LEASE.as_secs()),
    )
    .expect("write config");
    let mut instances = Vec::new();
    for _ in 0..INSTANCES {
        instances.push(start_instance(&db.url, &config, &up, dir.path()).await);
    }
    let mut clients = Vec::new();
    for instance in &instances {
        clients.push(TestClient::tasks().http(&instance.url).await);
    }

    // Work for everyone, created round-robin.
    let mut questions = Vec::new();
    for i in 0..QUESTIONS {
        let task = start_task(
            &clients[i % INSTANCES],
            "QBusinessQueryTool",
            json!({"query": format!("How many vacation days do employees get? ({i})")}),
        )
        .await;
        questions.push(task.task.task_id);
    }
    let mut assignments = BTreeMap::new();
    for (i, n) in (101..101 + ISSUES).enumerate() {
        let task = start_task(
            &clients[i % INSTANCES],
            "assign_copilot_to_issue",
            json!({"owner": "acme", "repo": "widgets", "issue_number": n}),
        )
        .await;
        assignments.insert(task.task.task_id, n);
    }

    // The busiest instance: most live leases, read from the store.
    let options = PgConnectOptions::from_str(&db.url).expect("URL");
    let mut conn = PgConnection::connect_with(&options).await.expect("connect");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let victim = loop {
        let held: Vec<(String, i64)> = sqlx::query_as(
            "SELECT lease_owner, COUNT(*) FROM tasks WHERE lease_owner IS NOT NULL \
             AND lease_until > $1 GROUP BY lease_owner ORDER BY 2 DESC",
        )
        .bind(now_ms())
        .fetch_all(&mut conn)
        .await
        .expect("read leases");
        if let Some((worker, count)) = held.first()
            && *count >= 3
        {
            break worker.clone();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no instance held 3 leases at once within 30s: {held:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let index = instances
        .iter()
        .position(|i| i.worker == victim)
        .unwrap_or_else(|| panic!("lease owner {victim} is none of our instances"));
    let pid = instances[index].child.id().expect("running") as i32;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("SIGKILL");
    let killed_at = now_ms();
    instances[index].child.wait().await.expect("reap");
    // A dead process cannot checkpoint or release: whatever it still holds
    // now is exactly what it held when it died.
    let orphans: Vec<(String, i64)> =
        sqlx::query_as("SELECT id, lease_until FROM tasks WHERE lease_owner = $1")
            .bind(&victim)
            .fetch_all(&mut conn)
            .await
            .expect("read orphans");
    assert!(!orphans.is_empty(), "the killed instance held no lease");
    let orphan_until: HashMap<String, i64> = orphans.iter().cloned().collect();

    // Each orphan is claimed by a survivor once its lease runs out.
    let mut taken_over = HashMap::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while taken_over.len() < orphans.len() {
        for (id, until) in &orphans {
            if taken_over.contains_key(id) {
                continue;
            }
            let owner: Option<String> =
                sqlx::query_scalar("SELECT lease_owner FROM tasks WHERE id = $1")
                    .bind(id)
                    .fetch_one(&mut conn)
                    .await
                    .expect("read task");
            if owner.as_deref() != Some(victim.as_str()) {
                let seen = now_ms();
                let late = seen - until;
                assert!(
                    late <= ms(IDLE_POLL + MARGIN),
                    "task {id} was taken over {late} ms after its lease ran out \
                     (bound: poll interval {IDLE_POLL:?} + margin {MARGIN:?})"
                );
                assert!(
                    *until <= killed_at + ms(LEASE) + 100,
                    "a lease longer than lease_seconds: {until} vs kill at {killed_at}"
                );
                taken_over.insert(id.clone(), seen);
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "orphans not taken over in 30s: {} of {}",
            taken_over.len(),
            orphans.len()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // Every task ends, completed, seen through the survivors.
    let survivors: Vec<usize> = (0..INSTANCES).filter(|&i| i != index).collect();
    for (n, id) in questions.iter().chain(assignments.keys()).enumerate() {
        let client = &clients[survivors[n % survivors.len()]];
        let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
        let payload = loop {
            let got = client
                .peer()
                .get_task(GetTaskParams::new(id.clone()))
                .await
                .expect("tasks/get");
            if got.task.payload.status().is_terminal() {
                break got.task.payload;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "task {id} did not end within 120s: {:?}",
                got.task
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        let TaskPayload::Completed { result } = &payload else {
            panic!("task {id} ended {payload:?}");
        };
        assert_ne!(
            result.get("isError"),
            Some(&json!(true)),
            "{id}: {result:?}"
        );
        if assignments.contains_key(id) {
            assert_eq!(
                result["structuredContent"]["outcome"],
                json!("finished"),
                "{id}: {result:?}"
            );
        }
    }

    // A question the dead instance was asking is answered by one more
    // ChatSync step: within lease + poll interval + one ChatSync + margin of
    // the kill.
    for id in &questions {
        let Some(until) = orphan_until.get(id) else {
            continue;
        };
        let updated: i64 = sqlx::query_scalar("SELECT updated_at FROM tasks WHERE id = $1")
            .bind(id)
            .fetch_one(&mut conn)
            .await
            .expect("read task");
        let bound = until + ms(IDLE_POLL + CHATSYNC_LATENCY + MARGIN);
        assert!(
            updated <= bound,
            "question {id} completed {} ms after the kill; bound {} ms",
            updated - killed_at,
            bound - killed_at
        );
    }

    // No side effect twice. ChatSync: each step sends clientToken
    // `<task>-<step>`; a repeated step repeats the token and Q Business
    // replays the first answer, so turns == questions exactly.
    let q = up.qbusiness.stats();
    for id in &questions {
        assert!(
            q.requests_by_client_token(&format!("{id}-0")) >= 1,
            "question {id} never reached Q Business with its step-0 token"
        );
    }
    assert_eq!(
        q.chat_sync_effects, QUESTIONS as u64,
        "a ChatSync turn was produced twice (or lost): {q:?}"
    );
    // Copilot: one agent run per issue, however often the step ran.
    let gh = up.github.stats();
    for n in 101..101 + ISSUES {
        assert_eq!(
            gh.assignments_for("acme/widgets", n),
            1,
            "issue #{n} was assigned {} times",
            gh.assignments_for("acme/widgets", n)
        );
    }

    let orphan_questions = questions
        .iter()
        .filter(|id| orphan_until.contains_key(*id))
        .count();
    let repeated = questions
        .iter()
        .filter(|id| q.requests_by_client_token(&format!("{id}-0")) > 1)
        .count();
    assert!(
        repeated >= 1,
        "no orphaned ChatSync step was repeated: the kill did not land mid-step"
    );
    for id in questions
        .iter()
        .filter(|id| !orphan_until.contains_key(*id))
    {
        assert_eq!(
            q.requests_by_client_token(&format!("{id}-0")),
            1,
            "question {id} was never orphaned, yet asked twice"
        );
    }
    let _ = writeln!(
        std::io::stderr(),
        "killed an instance holding {} leases ({orphan_questions} questions, {} assignments); \
         {repeated} ChatSync requests repeated with their token; {} turns",
        orphans.len(),
        orphans.len() - orphan_questions,
        q.chat_sync_effects
    );

    // The survivors counted each takeover once.
    let mut takeovers = 0.0;
    for &i in &survivors {
        let base = instances[i].url.trim_end_matches("/mcp");
        let scrape = reqwest::get(format!("{base}/metrics"))
            .await
            .expect("GET /metrics")
            .text()
            .await
            .expect("body");
        takeovers += scrape
            .lines()
            .find_map(|l| l.strip_prefix("agentgate_lease_takeovers_total "))
            .map_or(0.0, |v| v.trim().parse::<f64>().expect("number"));
    }
    assert_eq!(
        takeovers,
        orphans.len() as f64,
        "lease takeovers counted by the survivors"
    );

    for client in clients {
        let _ = client.cancel().await;
    }
    drop(instances);
    drop(conn);
    db.drop().await;
}
