//! `agentgate serve` on a PostgreSQL server that goes away and comes back:
//! `/readyz` and requests answer fast and say why, and the same process
//! serves again once the database is back. And on one that acknowledges
//! commits before they are on disk: refused at start unless the operator
//! accepts it (`store_durability = "relaxed"`).

use std::path::Path;
use std::time::{Duration, Instant};

use agentgate_testkit::faults::{PgCluster, unavailable};
use agentgate_testkit::{Gate, GateBuilder, eventually_async};
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_agentgate");
const STORE_KEY: &str = "7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a";

/// `agentgate serve` on `store`; returns it and its base URL.
async fn serve(dir: &Path, store: &str) -> (Gate, String) {
    let server = GateBuilder::agentgate(BIN, dir)
        .store(store)
        .env("AGENTGATE_STORE_KEY", STORE_KEY)
        .start()
        .await;
    let base = server.url.trim_end_matches("/mcp").to_owned();
    (server, base)
}

/// A raw 2026-07-28 `tasks/get`; returns the JSON-RPC message.
async fn tasks_get(client: &reqwest::Client, base: &str, id: &str) -> Value {
    let body = json!({
        "jsonrpc": "2.0", "id": 1, "method": "tasks/get",
        "params": {
            "taskId": id,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities":
                    {"extensions": {"io.modelcontextprotocol/tasks": {}}}
            }
        }
    });
    let text = client
        .post(format!("{base}/mcp"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tasks/get")
        .header("mcp-name", id)
        .body(body.to_string())
        .send()
        .await
        .expect("POST tasks/get")
        .text()
        .await
        .expect("body");
    let json = text
        .lines()
        .find_map(|l| l.strip_prefix("data:"))
        .map_or(text.trim(), str::trim);
    serde_json::from_str(json).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

async fn a_database_outage_gets_fast_clear_answers_and_heals_by_itself() {
    let pg = PgCluster::start().unwrap_or_else(|why| unavailable(&why));
    let dir = tempfile::tempdir().expect("tempdir");
    let (server, base) = serve(dir.path(), &pg.url()).await;
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .expect("client");
    let ready = client
        .get(format!("{base}/readyz"))
        .send()
        .await
        .expect("readyz");
    assert_eq!(ready.status(), 200);
    let unknown = tasks_get(&client, &base, "no-such-task").await;
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");

    pg.stop("fast").expect("stop PostgreSQL");
    let started = Instant::now();
    let probe = client
        .get(format!("{base}/readyz"))
        .send()
        .await
        .expect("readyz while the database is down");
    let took = started.elapsed();
    assert_eq!(probe.status(), 503);
    assert!(
        took < Duration::from_millis(1500),
        "/readyz took {took:?}; an orchestrator's 1 s probe must see an answer"
    );
    // The probe is unauthenticated: it names a code, not the driver's
    // message (the database's user, host and port stay in the log).
    let reason: Value = probe.json().await.expect("a JSON body");
    assert_eq!(reason["status"], "unavailable", "{reason}");
    let code = reason["reason"].as_str().unwrap_or_default();
    assert!(
        ["store_unreachable", "store_busy", "store_timeout"].contains(&code),
        "{reason}"
    );
    assert_eq!(
        reason.as_object().map(|o| o.len()),
        Some(2),
        "status and reason only: {reason}"
    );
    // The driver's message is the operator's, in the log at warn.
    let server = &server;
    eventually_async(
        "the /readyz failure in the log",
        Duration::from_secs(10),
        move || async move {
            server
                .stderr()
                .contains("/readyz: the task store did not answer")
        },
    )
    .await;
    // Without authentication /metrics is open too, and says as little.
    let metrics = client
        .get(format!("{base}/metrics"))
        .send()
        .await
        .expect("metrics while the database is down");
    assert_eq!(metrics.status(), 503);
    let text = metrics.text().await.expect("body");
    let port = pg.port().to_string();
    for internal in ["postgres", port.as_str(), "127.0.0.1", "connection"] {
        assert!(!text.contains(internal), "{internal:?} in /metrics: {text}");
    }

    // A request says the store is away, and how long to wait, instead of
    // hanging for the pool's timeout or claiming the task is unknown.
    let started = Instant::now();
    let refused = tasks_get(&client, &base, "no-such-task").await;
    let took = started.elapsed();
    assert_eq!(refused["error"]["code"], -32603, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("task store cannot take this request"),
        "{message}"
    );
    assert!(
        refused["error"]["data"]["retryAfterSeconds"].is_u64(),
        "{refused}"
    );
    assert!(refused["error"]["data"]["reason"].is_string(), "{refused}");
    assert!(
        took < Duration::from_secs(10),
        "tasks/get took {took:?} to fail"
    );

    // The database comes back: the same process is ready again by itself.
    pg.start_again().expect("start PostgreSQL again");
    let readyz = format!("{base}/readyz");
    let (client, readyz) = (&client, readyz.as_str());
    eventually_async(
        "readiness 30 s after the database came back",
        Duration::from_secs(30),
        move || async move {
            let status = client.get(readyz).send().await.map(|r| r.status().as_u16());
            matches!(status, Ok(200))
        },
    )
    .await;
    let unknown = tasks_get(client, &base, "no-such-task").await;
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
}

async fn a_database_without_synchronous_commit_is_refused_unless_relaxed() {
    let db = agentgate_testkit::pg::TestDatabase::create("serve_durability").await;
    let admin = sqlx::PgPool::connect(db.url()).await.expect("admin");
    sqlx::query(&format!(
        "ALTER DATABASE {} SET synchronous_commit = off",
        db.name()
    ))
    .execute(&admin)
    .await
    .expect("ALTER DATABASE");
    admin.close().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let relaxed = "[server]\nstore_durability = \"relaxed\"\n";

    // The flag wins over the config file: `full`, so refused, saying why.
    let refused = GateBuilder::agentgate(BIN, dir.path())
        .store(db.url())
        .env("AGENTGATE_STORE_KEY", STORE_KEY)
        .config(relaxed)
        .args(["--store-durability", "full"])
        .command()
        .output()
        .await
        .expect("run agentgate serve");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "must not serve: {stderr}");
    for what in ["synchronous_commit = off", "relaxed"] {
        assert!(stderr.contains(what), "the error says {what:?}: {stderr}");
    }

    // The config file alone accepts the window: served.
    let server = GateBuilder::agentgate(BIN, dir.path())
        .store(db.url())
        .env("AGENTGATE_STORE_KEY", STORE_KEY)
        .config(relaxed)
        .start()
        .await;
    let base = server.url.trim_end_matches("/mcp").to_owned();
    let ready = reqwest::get(format!("{base}/readyz"))
        .await
        .expect("GET /readyz");
    assert_eq!(ready.status(), 200);
}

/// This file's tests, for the binary's `main`.
pub(crate) fn register(
    tests: agentgate_testkit::harness::Tests,
) -> agentgate_testkit::harness::Tests {
    tests
        .test(
            "a_database_without_synchronous_commit_is_refused_unless_relaxed",
            a_database_without_synchronous_commit_is_refused_unless_relaxed,
        )
        .test(
            "a_database_outage_gets_fast_clear_answers_and_heals_by_itself",
            a_database_outage_gets_fast_clear_answers_and_heals_by_itself,
        )
}
