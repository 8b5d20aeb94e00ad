//! Losing an instance on PostgreSQL: three real `agentgate serve` processes
//! share one database and the three emulators (Q Business, GitHub, an A2A
//! agent that does not deduplicate messageIds); the one holding the most
//! leases is killed with SIGKILL mid-step. Every task still ends correctly,
//! the dead instance's tasks are taken over as soon as their leases run out,
//! and no step's upstream side effect happens twice (the emulators count
//! them).
//!
//! Needs a PostgreSQL server (`AGENTGATE_TEST_POSTGRES_URL`, default
//! `postgres://postgres@127.0.0.1:5432/postgres`); without one the test is reported
//! ignored, with the reason, unless `AGENTGATE_REQUIRE_POSTGRES=1` (then it fails).

use std::collections::{BTreeMap, HashMap};
use std::io::Write as _;
use std::path::Path;
use std::time::Duration;

use agentgate_sim::a2a::{A2aConfig, A2aSim};
use agentgate_sim::github::seed::IssueSeed;
use agentgate_sim::github::{GithubConfig, GithubSim, Seed};
use agentgate_sim::qbusiness::{QBusinessConfig, QBusinessSim};
use agentgate_testkit::pg::TestDatabase;
use agentgate_testkit::*;
use rmcp::model::TaskPayload;
use serde_json::json;
use sqlx::Connection as _;
use sqlx::postgres::{PgConnection, PgPool};

const BIN: &str = env!("CARGO_BIN_EXE_agentgate");

/// A `task_events` row: seq, kind, worker, message, status.
type HistoryRow = (i64, String, Option<String>, Option<String>, String);
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
/// Long-running A2A tasks (each about two seconds of agent work).
const A2A_TASKS: usize = 6;

/// One `agentgate serve` process and its name in `tasks.lease_owner`.
struct Instance {
    gate: Gate,
    worker: String,
}

struct Upstreams {
    qbusiness: Emulator<QBusinessSim>,
    github: Emulator<GithubSim>,
    a2a: Emulator<A2aSim>,
}

async fn start_instance(db: &str, config: &str, up: &Upstreams, home: &Path) -> Instance {
    let mut gate = GateBuilder::agentgate(BIN, home)
        .config(config)
        .store(db)
        .upstream(&up.qbusiness)
        .upstream(&up.github)
        .start()
        .await;
    let worker = gate.line_after("worker ").await;
    Instance { gate, worker }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

fn ms(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

async fn sigkill_of_the_busiest_instance_loses_no_task_and_repeats_no_side_effect() {
    let db = TestDatabase::create("agentgate_failover").await;
    // Every answer leaves after the emulator acted (see CHATSYNC_LATENCY):
    // an instance killed meanwhile leaves a side effect to not repeat.
    let qbusiness = emulators::qbusiness(QBusinessConfig::default())
        .answer_late(CHATSYNC_LATENCY)
        .start()
        .await;
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
    let github = emulators::github(GithubConfig {
        time_scale: 0.1,
        seed,
        ..GithubConfig::default()
    })
    .answer_late(GITHUB_LATENCY)
    .start()
    .await;
    // Its answers leave late too; it deduplicates nothing, so a repeated
    // send would run twice: agentgate's lookup (client_context_ids) must
    // find the task instead.
    let a2a = emulators::a2a(A2aConfig {
        dedupe_message_ids: false,
        step_delay: Duration::from_millis(300),
        ..A2aConfig::default()
    })
    .answer_late(GITHUB_LATENCY)
    .start()
    .await;
    let up = Upstreams {
        qbusiness,
        github,
        a2a,
    };

    let dir = tempfile::tempdir().expect("tempdir");
    let config = format!(
        "[engine]\nlease_seconds = {}\n[a2a]\npoll_interval_ms = 200\n{}",
        LEASE.as_secs(),
        up.a2a.a2a_agent("agent", "client_context_ids = true")
    );
    let mut instances = Vec::new();
    for _ in 0..INSTANCES {
        instances.push(start_instance(db.url(), &config, &up, dir.path()).await);
    }
    let mut clients = Vec::new();
    for instance in &instances {
        clients.push(TestClient::tasks().http(&instance.gate.url).await);
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

    let mut agent_tasks = Vec::new();
    for i in 0..A2A_TASKS {
        let task = start_task(
            &clients[i % INSTANCES],
            "agent_send_message",
            json!({"message": format!("failover {i}"),
                   "metadata": {"skill": "long-running", "steps": 6}}),
        )
        .await;
        agent_tasks.push(task.task.task_id);
    }

    // The busiest instance: most live leases, read from the store.
    let mut conn = PgConnection::connect(db.url()).await.expect("connect");
    let pool = PgPool::connect(db.url()).await.expect("connect");
    let leases = &pool;
    let victim = eventually_async(
        "an instance holding 3 leases at once",
        Duration::from_secs(30),
        move || async move {
            let held: Vec<(String, i64)> = sqlx::query_as(
                "SELECT lease_owner, COUNT(*) FROM tasks WHERE lease_owner IS NOT NULL \
                 AND lease_until > $1 GROUP BY lease_owner ORDER BY 2 DESC",
            )
            .bind(now_ms())
            .fetch_all(leases)
            .await
            .expect("read leases");
            held.first()
                .filter(|(_, count)| *count >= 3)
                .map(|(worker, _)| worker.clone())
        },
    )
    .await;
    pool.close().await;
    let index = instances
        .iter()
        .position(|i| i.worker == victim)
        .unwrap_or_else(|| panic!("lease owner {victim} is none of our instances"));
    instances[index].gate.kill();
    let killed_at = now_ms();
    instances[index].gate.wait().await;
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
        let payload = watch_task(client, id, Duration::from_secs(120), |got| {
            got.task.payload.status().is_terminal()
        })
        .await
        .task
        .payload;
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

    // The A2A tasks end with the agent's report, each its one task in the
    // context agentgate chose, no message acted on twice.
    for (n, id) in agent_tasks.iter().enumerate() {
        let client = &clients[survivors[n % survivors.len()]];
        let payload = watch_task(client, id, Duration::from_secs(120), |got| {
            got.task.payload.status().is_terminal()
        })
        .await
        .task
        .payload;
        let TaskPayload::Completed { result } = &payload else {
            panic!("A2A task {id} ended {payload:?}");
        };
        assert_eq!(first_text(result), "Finished 6 steps.", "{id}: {result:?}");
    }
    let a2a = up.a2a.sim.stats();
    assert!(
        a2a.max_effects_per_message_id() <= 1,
        "an A2A message was acted on twice: {a2a:?}"
    );
    for id in &agent_tasks {
        assert_eq!(
            a2a.tasks_in_context(&format!("agentgate-{id}")),
            1,
            "{id}: {a2a:?}"
        );
    }

    // Each orphan's history (the store's `task_events`) says what happened:
    // created, taken over from the killed instance by a live one, ended
    // completed; one event per change, in order.
    for id in taken_over.keys() {
        let events: Vec<HistoryRow> = sqlx::query_as(
            "SELECT seq, kind, worker, message, status FROM task_events WHERE task_id = $1 \
             ORDER BY seq",
        )
        .bind(id)
        .fetch_all(&mut conn)
        .await
        .expect("read the task's history");
        let seqs: Vec<i64> = events.iter().map(|e| e.0).collect();
        assert_eq!(
            seqs,
            (1..=i64::try_from(events.len()).expect("few")).collect::<Vec<_>>(),
            "{id}: {events:?}"
        );
        assert_eq!(events[0].1, "created", "{id}: {events:?}");
        let takeover = events
            .iter()
            .find(|e| e.1 == "taken_over")
            .unwrap_or_else(|| panic!("{id}: no takeover in its history: {events:?}"));
        assert_eq!(
            takeover.3.as_deref(),
            Some(format!("from {victim}").as_str()),
            "{id}: {events:?}"
        );
        assert_ne!(takeover.2.as_deref(), Some(victim.as_str()), "{id}");
        let last = events.last().expect("events");
        assert_eq!(
            (last.1.as_str(), last.4.as_str()),
            ("completed", "completed"),
            "{id}: {events:?}"
        );
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
    let q = up.qbusiness.sim.stats();
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
    let gh = up.github.sim.stats();
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
    let orphan_agents = agent_tasks
        .iter()
        .filter(|id| orphan_until.contains_key(*id))
        .count();
    let _ = writeln!(
        std::io::stderr(),
        "killed an instance holding {} leases ({orphan_questions} questions, {} assignments, \
         {orphan_agents} A2A tasks); {repeated} ChatSync requests repeated with their token; \
         {} turns; A2A: {} messages, each acted on once",
        orphans.len(),
        orphans.len() - orphan_questions - orphan_agents,
        q.chat_sync_effects,
        a2a.effects_by_message_id_count()
    );

    // The survivors counted each takeover once.
    let mut takeovers = 0.0;
    for &i in &survivors {
        let base = instances[i].gate.url.trim_end_matches("/mcp");
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
    drop(db);
}

/// This file's tests, for the binary's `main`.
pub(crate) fn register(tests: harness::Tests) -> harness::Tests {
    tests.test(
        "sigkill_of_the_busiest_instance_loses_no_task_and_repeats_no_side_effect",
        sigkill_of_the_busiest_instance_loses_no_task_and_repeats_no_side_effect,
    )
}
