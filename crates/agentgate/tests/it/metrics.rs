//! `/metrics` end to end: the real `agentgate serve --listen` binary runs
//! Q Business and Copilot tasks against both emulators (in this test
//! process), then the test scrapes `/metrics` and checks each series against
//! what it did and what the emulators counted.

use std::time::Duration;

use agentgate_sim::github::GithubConfig;
use agentgate_sim::qbusiness::QBusinessConfig;
use agentgate_testkit::*;
use rmcp::model::TaskPayload;
use serde_json::json;

const BIN: &str = env!("CARGO_BIN_EXE_agentgate");
const QBUSINESS: &str = "QBusinessQueryTool";
const ASSIGN: &str = "assign_copilot_to_issue";

/// The value of one exact series (`name{labels}`) in a scrape, 0 if absent
/// (a counter that never moved has no series yet).
fn value(scrape: &str, series: &str) -> f64 {
    scrape
        .lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .map(|v| v.trim().parse().expect("a number"))
        .unwrap_or(0.0)
}

/// Polls `tasks/get` until the task ends; returns it and how many polls it took.
async fn poll_to_end(client: &Client, id: &str) -> (TaskPayload, u64) {
    let mut polls = 0;
    let got = watch_task(client, id, Duration::from_secs(90), |got| {
        polls += 1;
        got.task.payload.status().is_terminal()
    })
    .await;
    (got.task.payload, polls)
}

#[tokio::test]
async fn metrics_count_tasks_steps_polls_and_upstream_calls_of_real_work() {
    let qbusiness = emulators::qbusiness(QBusinessConfig::default())
        .start()
        .await;
    // The first ChatSync is throttled: the SDK retries it, and both
    // attempts must be counted, as the emulator counts both.
    qbusiness.sim.faults().script(["ThrottlingException"]);
    let github = emulators::github(GithubConfig {
        time_scale: 0.1,
        ..GithubConfig::default()
    })
    .start()
    .await;

    let dir = tempfile::tempdir().expect("tempdir");
    let server = GateBuilder::agentgate(BIN, dir.path())
        .upstream(&qbusiness)
        .upstream(&github)
        .start()
        .await;
    let mcp = server.url.as_str();
    let base = mcp.strip_suffix("/mcp").expect("an /mcp URL").to_owned();
    let client = TestClient::tasks().http(mcp).await;

    let mut ids = Vec::new();
    for question in [
        "How many vacation days do employees get?",
        "What is the expense policy for travel?",
        "How do I reset my password?",
    ] {
        let task = start_task(&client, QBUSINESS, json!({"query": question})).await;
        ids.push(task.task.task_id);
    }
    let assign = start_task(
        &client,
        ASSIGN,
        json!({"owner": "acme", "repo": "widgets", "issue_number": 1}),
    )
    .await;
    ids.push(assign.task.task_id);
    let mut polls = 0;
    for id in &ids {
        let (payload, took) = poll_to_end(&client, id).await;
        assert!(
            matches!(payload, TaskPayload::Completed { .. }),
            "{payload:?}"
        );
        polls += took;
    }

    let response = reqwest::get(format!("{base}/metrics"))
        .await
        .expect("GET /metrics");
    assert!(response.status().is_success(), "{response:?}");
    let content_type = response.headers()["content-type"]
        .to_str()
        .expect("ascii")
        .to_owned();
    assert!(
        content_type.starts_with("application/openmetrics-text"),
        "{content_type}"
    );
    let scrape = response.text().await.expect("body");
    let q_stats = qbusiness.sim.stats();
    let gh_stats = github.sim.stats();

    // Tasks by tool and status, read from the store.
    let tasks = |tool: &str, status: &str| {
        value(
            &scrape,
            &format!("agentgate_tasks{{tool=\"{tool}\",status=\"{status}\"}}"),
        )
    };
    assert_eq!(tasks(QBUSINESS, "completed"), 3.0, "{scrape}");
    assert_eq!(tasks(QBUSINESS, "working"), 0.0, "{scrape}");
    assert_eq!(tasks(ASSIGN, "completed"), 1.0, "{scrape}");
    assert_eq!(tasks("request_copilot_changes", "working"), 0.0, "{scrape}");
    assert!(
        scrape.contains("agentgate_tasks{tool=\"request_copilot_changes\",status=\"working\"} 0"),
        "a served tool with no task shows zeros:\n{scrape}"
    );

    // Steps: one ChatSync step per question; the assignment ends after
    // several steps (assign, then watch).
    let steps = |tool: &str, outcome: &str| {
        value(
            &scrape,
            &format!(
                "agentgate_step_duration_seconds_count{{tool=\"{tool}\",outcome=\"{outcome}\"}}"
            ),
        )
    };
    assert_eq!(steps(QBUSINESS, "completed"), 3.0, "{scrape}");
    assert_eq!(steps(ASSIGN, "completed"), 1.0, "{scrape}");
    assert!(steps(ASSIGN, "waiting") >= 1.0, "{scrape}");
    assert!(
        value(
            &scrape,
            &format!(
                "agentgate_step_duration_seconds_sum{{tool=\"{QBUSINESS}\",outcome=\"completed\"}}"
            )
        ) > 0.0,
        "{scrape}"
    );

    // Every tasks/get this test sent, and nothing else.
    assert_eq!(
        value(&scrape, "agentgate_task_gets_total"),
        polls as f64,
        "{scrape}"
    );
    assert_eq!(
        value(&scrape, "agentgate_lease_takeovers_total"),
        0.0,
        "one instance takes nothing over"
    );

    // Upstream calls, attempt by attempt, as the emulators saw them.
    let upstream = |backend: &str, operation: &str, outcome: &str| {
        value(
            &scrape,
            &format!(
                "agentgate_upstream_calls_total{{backend=\"{backend}\",operation=\"{operation}\",outcome=\"{outcome}\"}}"
            ),
        )
    };
    assert_eq!(
        upstream("qbusiness", "ChatSync", "throttled"),
        1.0,
        "{scrape}"
    );
    assert_eq!(
        upstream("qbusiness", "ChatSync", "ok") + upstream("qbusiness", "ChatSync", "throttled"),
        q_stats.chat_sync_requests as f64,
        "{scrape}"
    );
    assert_eq!(q_stats.chat_sync_requests, 4, "{q_stats:?}");
    // Mutations happen only in the assignment step, which has ended, so the
    // count cannot move between the scrape and the emulator's snapshot (the
    // watcher's queries can).
    assert_eq!(
        upstream("github", "graphql_mutation", "ok"),
        gh_stats.graphql_mutations as f64,
        "{scrape}"
    );
    assert!(gh_stats.graphql_mutations >= 1);
    assert!(upstream("github", "graphql_query", "ok") >= 1.0, "{scrape}");
    assert!(
        upstream("github", "graphql_query", "ok") <= github.sim.stats().graphql_queries as f64,
        "never more than GitHub received:\n{scrape}"
    );

    client.cancel().await.expect("close");
}
