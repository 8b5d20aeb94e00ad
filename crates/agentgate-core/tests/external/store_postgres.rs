//! The shared store suite on PostgreSQL, plus what only a shared server can
//! show: several instances claiming from one table.
//!
//! The server is `AGENTGATE_TEST_POSTGRES_URL` (default
//! `postgres://postgres@127.0.0.1:5432/postgres`; `.ci/postgres.sh` starts
//! one). Every test gets a schema of its own, `agentgate_test_<random>`, which
//! its stores reach through `search_path`; the schema is dropped when the test
//! ends, passed or failed, so tests run in parallel and leave nothing behind.
//!
//! Without a server each test is reported ignored, with the reason, unless
//! `AGENTGATE_REQUIRE_POSTGRES=1` (as in CI): then it fails. (This file has
//! the harness of `agentgate_testkit::harness`, which can say so at run
//! time.)

use std::collections::HashSet;
use std::time::Duration;

use agentgate_backend::{Millis, Owner, TaskId};
use agentgate_core::store::{PostgresStore, TaskStore};
use agentgate_core::task::{Fence, NewTask};
use agentgate_testkit::pg::{self, TestSchema};
use serde_json::json;
use sqlx::Connection as _;
use sqlx::postgres::PgPoolOptions;

const T0: Millis = Millis::from_unix_ms(1_800_000_000_000);
const LEASE: Duration = Duration::from_secs(300);

/// A store in a fresh schema of the test server (the shared harness's
/// [`TestSchema`], dropped however the test ends).
struct SchemaStore {
    // Declared first, so the store's pool goes before its schema does.
    store: PostgresStore,
    schema: TestSchema,
}

impl SchemaStore {
    /// A fresh schema and a store in it; without a server the test ends
    /// as skipped.
    async fn create() -> Self {
        let schema = TestSchema::create("agentgate_test").await;
        let store = open_in(&schema).await;
        Self { store, schema }
    }

    /// Another store on the same schema, with a pool of its own, as a second
    /// gateway instance would have.
    async fn open(&self) -> PostgresStore {
        open_in(&self.schema).await
    }
}

async fn open_in(schema: &TestSchema) -> PostgresStore {
    PostgresStore::connect_with(schema.options(), PgPoolOptions::new().max_connections(4))
        .await
        .expect("open store in test schema")
}

impl std::ops::Deref for SchemaStore {
    type Target = PostgresStore;

    fn deref(&self) -> &PostgresStore {
        &self.store
    }
}

fn new_task() -> NewTask {
    NewTask {
        id: TaskId::generate(),
        owner: Owner::new("alice"),
        tool: "tool".into(),
        args: json!({"n": 1}),
        status_message: None,
        ttl_ms: None,
        now: T0,
    }
}

async fn two_instances_claiming_at_once_never_share_a_task() {
    let schema = SchemaStore::create().await;
    let instances = [schema.open().await, schema.open().await];
    for _ in 0..200 {
        instances[0].create(new_task()).await.expect("create");
    }
    // Two claim loops per instance, all racing over the same 200 due tasks.
    let mut claimers = tokio::task::JoinSet::new();
    for (n, store) in instances.iter().enumerate() {
        for loop_no in 0..2 {
            let store = store.clone();
            let worker = format!("instance{n}-loop{loop_no}");
            claimers.spawn(async move {
                let mut claimed = Vec::new();
                loop {
                    let batch = store.claim(&worker, 10, LEASE, T0).await.expect("claim");
                    if batch.is_empty() {
                        return claimed;
                    }
                    assert!(batch.len() <= 10, "the limit is honoured");
                    claimed.extend(batch);
                }
            });
        }
    }
    let mut all = Vec::new();
    while let Some(claimed) = claimers.join_next().await {
        all.extend(claimed.expect("claim loop"));
    }
    let distinct: HashSet<_> = all.iter().map(|t| t.id.clone()).collect();
    assert_eq!(distinct.len(), all.len(), "a task was handed out twice");
    assert_eq!(all.len(), 200, "every due task is claimed");
    assert!(
        all.iter().all(|t| t.fence == Fence::from_raw(1)),
        "each task was leased exactly once"
    );
    let left = instances[1]
        .claim("late", 10, LEASE, T0)
        .await
        .expect("claim");
    assert!(left.is_empty());
}

/// Leases are judged on the database server's clock: an instance whose
/// clock runs 90 s ahead, by which a 30 s lease ran out a minute ago, does
/// not take it over while its holder still has it; it does once the lease
/// is over on the server's clock.
async fn a_claim_from_a_clock_running_ahead_does_not_take_a_live_lease() {
    let schema = SchemaStore::create().await;
    let (holder, ahead) = (schema.open().await, schema.open().await);
    let lease = Duration::from_secs(30);
    let task = holder.create(new_task()).await.expect("create");
    let held = holder.claim("holder", 10, lease, T0).await.expect("claim");
    assert_eq!(held.len(), 1);
    let skewed = T0.saturating_add(Duration::from_secs(90));
    let stolen = ahead
        .claim("ahead", 10, lease, skewed)
        .await
        .expect("claim");
    assert!(stolen.is_empty(), "a live lease was taken: {stolen:?}");

    // Renewed, still by the holder's clock: still not taken.
    holder
        .heartbeat(&task.id, "holder", held[0].fence, lease, T0)
        .await
        .expect("heartbeat");
    let stolen = ahead
        .claim("ahead", 10, lease, skewed)
        .await
        .expect("claim");
    assert!(stolen.is_empty(), "a renewed lease was taken: {stolen:?}");

    // The holder's last heartbeat, of no length: the lease is over on the
    // server's clock too, and the instance ahead takes it over.
    holder
        .heartbeat(&task.id, "holder", held[0].fence, Duration::ZERO, T0)
        .await
        .expect("heartbeat");
    let taken = ahead
        .claim("ahead", 10, lease, skewed)
        .await
        .expect("claim");
    assert_eq!(taken.len(), 1);
    assert_eq!(taken[0].taken_over_from.as_deref(), Some("holder"));
}

async fn store_url_opens_postgres_with_pool_settings() {
    let schema = SchemaStore::create().await;
    let mut url = url::Url::parse(&pg::server_url()).expect("test URL");
    url.query_pairs_mut()
        .append_pair("max_connections", "2")
        .append_pair("acquire_timeout", "5")
        .append_pair(
            "options",
            &format!("-c search_path={}", schema.schema.name()),
        )
        .append_pair("application_name", schema.schema.name());
    let store = agentgate_core::store::open(url.as_str())
        .await
        .expect("open by URL");
    let shown = format!("{store:?}");
    assert!(shown.contains("max_connections: 2"), "{shown}");
    if let Some(password) = url.password() {
        assert!(!shown.contains(password), "Debug shows the password");
    }
    let task = new_task();
    let id = task.id.clone();
    store.create(task).await.expect("create");
    // The task is in the test schema, where the suite's store sees it too.
    let seen = schema
        .get(&Owner::new("alice"), &id, T0)
        .await
        .expect("get");
    assert!(seen.is_some());
}

async fn changes_made_by_one_instance_are_heard_by_another() {
    use agentgate_core::store::ChangeKind;
    let schema = SchemaStore::create().await;
    let (writer, listener) = (schema.open().await, schema.open().await);
    let mut heard = listener.changes().expect("PostgreSQL relays changes");
    let task = new_task();
    let id = task.id.clone();
    writer.create(task).await.expect("create");
    writer
        .request_cancel(
            &Owner::new("alice"),
            &id,
            T0.saturating_add(Duration::from_millis(1)),
        )
        .await
        .expect("cancel");
    // NOTIFY is database-wide: other tests' changes may arrive too.
    let wanted = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            match heard.recv().await {
                Ok(change) if change.task == id => return change.kind,
                Ok(_) => {}
                Err(e) => panic!("listener: {e}"),
            }
        }
    })
    .await
    .expect("the cancel is heard by the other instance");
    assert_eq!(wanted, ChangeKind::CancelRequested);
}

/// Backends of `schema`'s connections (its `application_name`) that last ran
/// a `LISTEN`: the store's change relay.
async fn listening_backends(schema: &TestSchema) -> i64 {
    let mut admin = sqlx::PgConnection::connect(&pg::server_url())
        .await
        .expect("connect to the test server");
    let count = sqlx::query_scalar(
        "SELECT count(*) FROM pg_stat_activity \
         WHERE application_name = $1 AND query LIKE 'LISTEN%'",
    )
    .bind(schema.name())
    .fetch_one(&mut admin)
    .await
    .expect("pg_stat_activity");
    let _ = admin.close().await;
    count
}

/// The relay of change notices ends with the last clone of its store, and
/// its connection with it; it once outlived the store, holding a connection
/// and, once the database was gone, logging a failure every second.
async fn a_dropped_store_stops_listening() {
    let schema = TestSchema::create("agentgate_test").await;
    let store = open_in(&schema).await;
    let clone = store.clone();
    assert_eq!(listening_backends(&schema).await, 1, "the store listens");
    drop(store);
    // A clone keeps it listening.
    let mut heard = clone.changes().expect("PostgreSQL relays changes");
    let task = new_task();
    let id = task.id.clone();
    clone.create(task).await.expect("create");
    clone
        .request_cancel(&Owner::new("alice"), &id, T0)
        .await
        .expect("cancel");
    // The channel is the database's: other tests' changes are heard too.
    let own = async {
        loop {
            let change = heard.recv().await.expect("the relay is running");
            if change.task == id {
                return change;
            }
        }
    };
    let change = tokio::time::timeout(Duration::from_secs(20), own)
        .await
        .expect("the cancel is heard");
    assert_eq!(
        change.kind,
        agentgate_core::store::ChangeKind::CancelRequested
    );
    drop(clone);
    agentgate_testkit::poll::eventually_async(
        "the relay's LISTEN connection to close",
        Duration::from_secs(20),
        || async { listening_backends(&schema).await == 0 },
    )
    .await;
    // And the relay itself is gone: its side of the channel is dropped.
    let ended = tokio::time::timeout(Duration::from_secs(20), async {
        use tokio::sync::broadcast::error::RecvError;
        while !matches!(heard.recv().await, Err(RecvError::Closed)) {}
    })
    .await;
    assert!(ended.is_ok(), "the change channel closes with the relay");
}

/// This file's tests, for the binary's `main`.
/// `migration_status` reads a database without changing it: a new one has
/// every migration pending and gets no table; once opened (migrated), every
/// one is applied.
async fn migration_status_reads_without_applying() {
    let db = pg::TestDatabase::create("migstatus").await;
    let before = agentgate_core::store::migration_status(db.url())
        .await
        .expect("status of a new database");
    assert!(!before.is_empty());
    assert!(before.iter().all(|m| !m.applied), "{before:?}");
    let mut raw = sqlx::PgConnection::connect(db.url()).await.expect("raw");
    let tables: i64 =
        sqlx::query_scalar("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'")
            .fetch_one(&mut raw)
            .await
            .expect("count tables");
    assert_eq!(tables, 0, "reading the status created nothing");
    let store = PostgresStore::open(db.url()).await.expect("open migrates");
    drop(store);
    let after = agentgate_core::store::migration_status(db.url())
        .await
        .expect("status after migrating");
    assert_eq!(after.len(), before.len());
    assert!(after.iter().all(|m| m.applied), "{after:?}");
    let _ = raw.close().await;
}

pub(crate) fn register(
    mut tests: agentgate_testkit::harness::Tests,
) -> agentgate_testkit::harness::Tests {
    for (name, case) in agentgate_core::store_suite!(cases: SchemaStore::create) {
        tests = tests.test(name, case);
    }
    tests
        .test(
            "migration_status_reads_without_applying",
            migration_status_reads_without_applying,
        )
        .multi_thread(
            "two_instances_claiming_at_once_never_share_a_task",
            two_instances_claiming_at_once_never_share_a_task,
        )
        .test(
            "a_claim_from_a_clock_running_ahead_does_not_take_a_live_lease",
            a_claim_from_a_clock_running_ahead_does_not_take_a_live_lease,
        )
        .test(
            "store_url_opens_postgres_with_pool_settings",
            store_url_opens_postgres_with_pool_settings,
        )
        .test(
            "changes_made_by_one_instance_are_heard_by_another",
            changes_made_by_one_instance_are_heard_by_another,
        )
        .test(
            "a_dropped_store_stops_listening",
            a_dropped_store_stops_listening,
        )
}
