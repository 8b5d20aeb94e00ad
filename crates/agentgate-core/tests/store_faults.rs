//! The stores under real faults: a SQLite file on a disk that fills up, a
//! PostgreSQL server that is stopped and started under load, and database
//! connections killed mid-transaction. Each test asserts that no
//! acknowledged write is lost, that refusals say why, and that the store
//! recovers by itself, without being reopened.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentgate_core::clock::{Clock as _, Millis};
use agentgate_core::store::{Outage, PostgresStore, SqliteStore, StoreError, TaskStore};
use agentgate_core::task::{NewTask, Outcome, Owner, TaskId, TaskPhase};
use agentgate_testkit::faults::{PgCluster, SmallDisk, unavailable};
use serde_json::json;

const LEASE: Duration = Duration::from_secs(30);

fn owner() -> Owner {
    Owner::new("alice")
}

fn new_task(now: Millis) -> NewTask {
    NewTask {
        id: TaskId::generate(),
        owner: owner(),
        tool: "tool".into(),
        // Big enough that a few dozen fill the small disk's free space.
        args: json!({ "text": "x".repeat(2048) }),
        status_message: Some("queued".into()),
        ttl_ms: None,
        now,
    }
}

fn now() -> Millis {
    agentgate_core::clock::SystemClock.now()
}

/// Creates tasks until the store refuses one; returns the acknowledged ids
/// and the refusal.
async fn create_until_refused(store: &dyn TaskStore, acked: &mut Vec<TaskId>) -> StoreError {
    for _ in 0..100_000 {
        let task = new_task(now());
        let id = task.id.clone();
        match store.create(task).await {
            Ok(record) => {
                assert_eq!(record.id, id);
                acked.push(id);
            }
            Err(e) => return e,
        }
    }
    panic!("the small disk never filled up");
}

async fn sqlite_on_a_full_disk_refuses_writes_loses_nothing_and_recovers_by_itself() {
    let disk = SmallDisk::mount(4 * 1024 * 1024).unwrap_or_else(|why| unavailable(&why));
    let url = format!("sqlite://{}", disk.path().join("tasks.db").display());
    let store = SqliteStore::open(&url).await.expect("open");

    // A running task to checkpoint while the disk is full, and one waiting
    // for input to answer.
    let running = new_task(now());
    let running_id = running.id.clone();
    store.create(running).await.expect("create");
    let waiting = new_task(now());
    let waiting_id = waiting.id.clone();
    store.create(waiting).await.expect("create");
    let claimed = store.claim("w1", 10, LEASE, now()).await.expect("claim");
    assert_eq!(claimed.len(), 2);
    let attempt_of = |id: &TaskId| claimed.iter().find(|c| &c.id == id).expect("claimed").fence;
    store
        .checkpoint(
            &waiting_id,
            "w1",
            attempt_of(&waiting_id),
            Outcome::InputRequired {
                state: json!({}),
                status_message: Some("asking".into()),
                requests: [("q".to_owned(), json!({"method": "elicitation/create"}))].into(),
            },
            now(),
        )
        .await
        .expect("ask");

    // Fill the disk: first with a filler file, then with tasks.
    disk.fill("filler");
    let mut acked = vec![running_id.clone(), waiting_id.clone()];
    let refusal = create_until_refused(&store, &mut acked).await;
    assert_eq!(
        refusal.outage(),
        Some(Outage::DiskFull),
        "a full disk is named as such: {refusal}"
    );
    assert!(
        refusal.to_string().contains("disk is full"),
        "the refusal says why: {refusal}"
    );

    // While full: every kind of write is refused (never wedged, never
    // half-done), again and again; reads keep working.
    for round in 0..20 {
        let create = store.create(new_task(now())).await;
        assert!(
            matches!(&create, Err(e) if e.outage().is_some()),
            "round {round}: a create on a full disk must be refused, got {create:?}"
        );
        let checkpoint = store
            .checkpoint(
                &running_id,
                "w1",
                attempt_of(&running_id),
                Outcome::Completed {
                    result: json!({ "content": [], "padding": "y".repeat(8192) }),
                },
                now(),
            )
            .await;
        assert!(
            matches!(&checkpoint, Err(e) if e.outage().is_some()),
            "round {round}: a checkpoint on a full disk must be refused, got {checkpoint:?}"
        );
        let answer = store
            .record_input(
                &owner(),
                &waiting_id,
                BTreeMap::from([(
                    "q".to_owned(),
                    json!({"action": "accept", "content": {"a": "z".repeat(8192)}}),
                )]),
                now(),
            )
            .await;
        assert!(
            matches!(&answer, Err(e) if e.outage().is_some()),
            "round {round}: an answer on a full disk must be refused, got {answer:?}"
        );
        let task = store
            .get(&owner(), &running_id, now())
            .await
            .expect("reads work on a full disk")
            .expect("task");
        assert_eq!(task.status, TaskPhase::Working);
    }

    // Space comes back: the same store, not reopened, takes writes again.
    disk.free("filler");
    let answered = store
        .record_input(
            &owner(),
            &waiting_id,
            BTreeMap::from([(
                "q".to_owned(),
                json!({"action": "accept", "content": {"a": "b"}}),
            )]),
            now(),
        )
        .await
        .expect("an answer after space is freed");
    assert!(answered.complete);
    let saved = store
        .checkpoint(
            &running_id,
            "w1",
            attempt_of(&running_id),
            Outcome::Completed {
                result: json!({ "content": [] }),
            },
            now(),
        )
        .await
        .expect("a checkpoint after space is freed");
    assert_eq!(saved.status, TaskPhase::Completed);
    for _ in 0..10 {
        let task = new_task(now());
        let id = task.id.clone();
        store
            .create(task)
            .await
            .expect("a create after space is freed");
        acked.push(id);
    }
    // Every pooled connection is usable: claims (transactions) on all of
    // them succeed, none left inside a transaction that never ends.
    let mut claims = Vec::new();
    for _ in 0..16 {
        claims.push(store.claim("w2", 1, LEASE, now()));
    }
    for claim in futures::future::join_all(claims).await {
        claim.expect("claim after recovery");
    }

    // A restart finds every acknowledged task, with what was acknowledged.
    drop(store);
    let reopened = SqliteStore::open(&url).await.expect("reopen");
    let mut missing = Vec::new();
    for id in &acked {
        if reopened
            .get(&owner(), id, now())
            .await
            .expect("get")
            .is_none()
        {
            missing.push(id.clone());
        }
    }
    assert!(
        missing.is_empty(),
        "{} of {} acknowledged tasks were lost: {missing:?}",
        missing.len(),
        acked.len()
    );
    let done = reopened
        .get(&owner(), &running_id, now())
        .await
        .expect("get")
        .expect("task");
    assert_eq!(done.status, TaskPhase::Completed);
    let resumed = reopened
        .get(&owner(), &waiting_id, now())
        .await
        .expect("get")
        .expect("task");
    assert_eq!(resumed.status, TaskPhase::Working);
}

async fn sqlite_reads_of_a_foreign_task_never_decode_its_row() {
    // Another owner's id must cost what an unknown id costs: the row is not
    // even read. Shown by damaging the row: its owner sees the damage,
    // anyone else sees nothing.
    let dir = tempfile::tempdir().expect("tempdir");
    let url = format!("sqlite://{}", dir.path().join("tasks.db").display());
    let store = SqliteStore::open(&url).await.expect("open");
    let task = new_task(now());
    let id = task.id.clone();
    store.create(task).await.expect("create");
    let raw = sqlx::SqlitePool::connect(&url).await.expect("raw");
    sqlx::query("UPDATE tasks SET input_requests = 'not json' WHERE id = ?")
        .bind(id.as_str())
        .execute(&raw)
        .await
        .expect("damage the row");
    assert_foreign_is_unknown(&store, &id).await;
}

async fn assert_foreign_is_unknown(store: &dyn TaskStore, id: &TaskId) {
    assert!(
        matches!(
            store.get(&owner(), id, now()).await,
            Err(StoreError::Corrupt { .. })
        ),
        "the owner reads the damaged row"
    );
    let bob = Owner::new("bob");
    assert!(store.get(&bob, id, now()).await.expect("get").is_none());
    assert!(matches!(
        store.record_input(&bob, id, BTreeMap::new(), now()).await,
        Err(StoreError::NotFound)
    ));
    assert!(matches!(
        store.request_cancel(&bob, id, now()).await,
        Err(StoreError::NotFound)
    ));
}

/// A PostgreSQL cluster of this test's own; where one cannot be started,
/// the test ends as skipped.
fn cluster() -> PgCluster {
    PgCluster::start().unwrap_or_else(|why| unavailable(&why))
}

async fn postgres_reads_of_a_foreign_task_never_decode_its_row() {
    let pg = cluster();
    let store = PostgresStore::open(&pg.url()).await.expect("open");
    let task = new_task(now());
    let id = task.id.clone();
    store.create(task).await.expect("create");
    let raw = sqlx::PgPool::connect(&pg.url()).await.expect("raw");
    sqlx::query("UPDATE tasks SET input_requests = '[1]'::jsonb WHERE id = $1")
        .bind(id.as_str())
        .execute(&raw)
        .await
        .expect("damage the row");
    assert_foreign_is_unknown(&store, &id).await;
}

async fn postgres_outage_gets_fast_clear_refusals_and_recovers_without_reopening() {
    let pg = cluster();
    let store: Arc<dyn TaskStore> = Arc::new(
        PostgresStore::open(&format!("{}?max_connections=4", pg.url()))
            .await
            .expect("open"),
    );
    let before = new_task(now());
    let before_id = before.id.clone();
    store.create(before).await.expect("create");

    pg.stop("fast").expect("stop the server");
    // Every request fails fast (the pool's 2 s acquire timeout, not 30 s)
    // and says the store is away.
    for _ in 0..3 {
        let started = Instant::now();
        let get = store.get(&owner(), &before_id, now()).await;
        let create = store.create(new_task(now())).await;
        let took = started.elapsed();
        for result in [get.map(|_| ()), create.map(|_| ())] {
            let e = result.expect_err("the database is down");
            assert!(e.outage().is_some(), "an outage is named as one: {e:?}");
        }
        assert!(
            took < Duration::from_secs(10),
            "two requests took {took:?} to fail while the database was down"
        );
    }

    pg.start_again().expect("start the server again");
    // The same store, not reopened, works again as soon as the server is up.
    let after = new_task(now());
    let after_id = after.id.clone();
    store.create(after).await.expect("create after the outage");
    for id in [&before_id, &after_id] {
        assert!(
            store.get(&owner(), id, now()).await.expect("get").is_some(),
            "task {id} is there after the outage"
        );
    }
}

async fn postgres_connections_killed_mid_transaction_lose_no_acknowledged_write() {
    let pg = cluster();
    let url = format!(
        "{}?max_connections=6&application_name=agentgate-victim",
        pg.url()
    );
    let store: Arc<dyn TaskStore> = Arc::new(PostgresStore::open(&url).await.expect("open"));
    let admin = sqlx::PgPool::connect(&pg.url()).await.expect("admin");

    // Writers: creates, claims and checkpoints in transactions, all the time.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut writers = Vec::new();
    for w in 0..4 {
        let store = store.clone();
        let stop = stop.clone();
        writers.push(tokio::spawn(async move {
            let worker = format!("w{w}");
            let mut acked = Vec::new();
            let mut completed = Vec::new();
            let mut refused = 0u32;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let task = new_task(now());
                let id = task.id.clone();
                match store.create(task).await {
                    Ok(_) => acked.push(id),
                    Err(_) => refused += 1,
                }
                if let Ok(claimed) = store.claim(&worker, 2, LEASE, now()).await {
                    for task in claimed {
                        let saved = store
                            .checkpoint(
                                &task.id,
                                &worker,
                                task.fence,
                                Outcome::Completed {
                                    result: json!({ "content": [] }),
                                },
                                now(),
                            )
                            .await;
                        if saved.is_ok() {
                            completed.push(task.id.clone());
                        }
                    }
                }
            }
            (acked, completed, refused)
        }));
    }
    // The killer: terminates the store's connections, mid-whatever they do.
    let mut kills = 0u64;
    let deadline = Instant::now() + Duration::from_secs(4);
    while Instant::now() < deadline {
        let killed: Vec<(bool,)> = sqlx::query_as(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE application_name = 'agentgate-victim' AND pid <> pg_backend_pid()",
        )
        .fetch_all(&admin)
        .await
        .expect("kill");
        kills += killed.len() as u64;
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut acked = Vec::new();
    let mut completed = HashSet::new();
    let mut refused = 0;
    for writer in writers {
        let (a, c, r) = writer.await.expect("writer");
        acked.extend(a);
        completed.extend(c);
        refused += r;
    }
    assert!(kills > 10, "the test killed only {kills} connections");
    assert!(!acked.is_empty(), "no write got through between the kills");

    // Every acknowledged create exists, every acknowledged checkpoint holds,
    // and the store (not reopened) works.
    let fresh = new_task(now());
    store.create(fresh).await.expect("create after the kills");
    for id in &acked {
        let task = store
            .get(&owner(), id, now())
            .await
            .expect("get")
            .unwrap_or_else(|| panic!("acknowledged task {id} was lost"));
        if completed.contains(id) {
            assert_eq!(
                task.status,
                TaskPhase::Completed,
                "checkpoint of {id} was lost"
            );
        }
    }
    eprintln!(
        "{} creates acknowledged, {} checkpoints, {refused} refused, {kills} connections killed",
        acked.len(),
        completed.len()
    );
}

fn main() -> std::process::ExitCode {
    agentgate_testkit::harness::Tests::new()
        .test(
            "sqlite_on_a_full_disk_refuses_writes_loses_nothing_and_recovers_by_itself",
            sqlite_on_a_full_disk_refuses_writes_loses_nothing_and_recovers_by_itself,
        )
        .test(
            "sqlite_reads_of_a_foreign_task_never_decode_its_row",
            sqlite_reads_of_a_foreign_task_never_decode_its_row,
        )
        .test(
            "postgres_reads_of_a_foreign_task_never_decode_its_row",
            postgres_reads_of_a_foreign_task_never_decode_its_row,
        )
        .test(
            "postgres_outage_gets_fast_clear_refusals_and_recovers_without_reopening",
            postgres_outage_gets_fast_clear_refusals_and_recovers_without_reopening,
        )
        .test(
            "postgres_connections_killed_mid_transaction_lose_no_acknowledged_write",
            postgres_connections_killed_mid_transaction_lose_no_acknowledged_write,
        )
        .run()
}
