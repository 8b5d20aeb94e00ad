//! The shared store: one PostgreSQL database that several gateway instances
//! use at once.
//!
//! The schema mirrors the SQLite store's (`migrations/postgres`): timestamps
//! are `BIGINT` Unix milliseconds, because the engine passes time in (so
//! tests move the clock instead of sleeping) and the shared
//! [`transition`](super::transition) rules work on those numbers; JSON
//! columns are `JSONB`.
//!
//! # Claims, fencing and concurrency
//!
//! - **Claim.** `claim` picks due, unleased (or lease-expired) rows with
//!   `SELECT … FOR UPDATE SKIP LOCKED` and leases them in the same statement.
//!   A row another instance is claiming right now is locked, so it is skipped
//!   rather than waited for; a row another instance has just claimed and
//!   committed is re-checked by PostgreSQL against the new lease and dropped.
//!   So two instances never hand out the same task, and never block each other.
//! - **Lease clock.** A lease has two ends: `lease_until` on the holder's
//!   clock (the `now` it passed, as on SQLite; `runnable_at` and `next_due`
//!   read it) and `lease_server_until` on the database server's clock
//!   ([`SERVER_NOW`]). A claim takes a lease over only once both have
//!   passed, so an instance whose clock runs ahead cannot take a live lease
//!   and run the same step twice; one whose clock runs behind takes expired
//!   leases over late, by its skew. Due times are the callers' clocks:
//!   instances are assumed to keep their clocks roughly in sync (NTP), and
//!   one that does not runs steps early or late, never in two places.
//! - **Fencing.** Every claim takes the next [`Fence`] (column `attempt`).
//!   `heartbeat` is one
//!   `UPDATE … WHERE lease_owner = $worker AND attempt = $fence`: if a claim
//!   took the row over in the meantime, PostgreSQL re-evaluates the condition
//!   on the new row, matches nothing, and the caller gets
//!   [`StoreError::LeaseLost`].
//! - **Read-modify-write.** `record_input` and `checkpoint` read the row with
//!   `SELECT … FOR UPDATE` in a transaction, check it (owner, expiry; lease
//!   holder and attempt), apply the change and write it back before
//!   committing. The row lock serialises them against each other and against
//!   claims, so an answer is never lost to a concurrent checkpoint and a
//!   stale worker never overwrites the state of the attempt that replaced it.
//! - **Secrets** are inserted with `ON CONFLICT DO NOTHING` and then read, so
//!   instances racing to create one all end up with the same value.
//! - **Change notices.** Saving a step, recording input, nudging and
//!   requesting a cancel also `NOTIFY` on [`CHANNEL`] in the same
//!   transaction (delivered on commit). Checkpoints are group-committed
//!   (see [`crate::store::group_commit`]): one transaction and one notice,
//!   naming every task saved, per batch. Every store `LISTEN`s from `open` on
//!   and hands the notices out through [`TaskStore::changes`]; the engine
//!   wakes its claim loop on them, tells local waiters (inline calls,
//!   `task_status`), and interrupts a local step whose task was cancelled
//!   through another instance.
//! - **Migrations** run on `open`; sqlx holds an advisory lock while it
//!   migrates, so instances starting together apply them once.
//!
//! # URL and pool
//!
//! `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?PARAMS]` (or
//! `postgresql://`). sqlx's own parameters work (`sslmode`, `sslrootcert`,
//! `application_name`, `options`, …), and two pool settings are read and
//! removed from the query before the URL reaches sqlx:
//!
//! - `max_connections` (default 10): the most connections this instance opens.
//! - `acquire_timeout` (seconds, default 2): how long an operation waits for a
//!   connection (a free one, or a new one to a server that refuses them)
//!   before it fails with [`StoreError::Unavailable`]. Short on purpose: while
//!   the database is away, requests get a fast, clear answer with a retry
//!   hint instead of hanging, and hold nothing while they wait.
//! - `startup_timeout` (seconds, default 30): how long `open` keeps retrying a
//!   server that refuses connections (one that is still starting).
//!
//! # Durability
//!
//! A write is acknowledged after its `COMMIT` returned, which means on disk
//! only if the server syncs its WAL before answering. `open` reads the
//! server's `fsync` and `synchronous_commit` (`SHOW`, on a connection like
//! the pool's, so settings of the database, the role or the URL's
//! `options` count) and, with [`Durability::Full`] (the default), refuses
//! to serve when `fsync = off` or `synchronous_commit = off`, with
//! [`StoreError::NotDurable`] naming the setting and its value.
//! `synchronous_commit` `local`, `on`, `remote_write` and `remote_apply`
//! all flush the WAL to the server's own disk before a commit returns
//! (they differ only in what they wait for from standbys), so all are
//! accepted. [`Durability::Relaxed`] serves whatever the settings, and
//! logs a warning naming them.
//!
//! # Failures
//!
//! A connection that sqlx still counts as inside a transaction when it is
//! released (a `COMMIT` or `ROLLBACK` that failed) is closed, never reused;
//! sqlx also pings every connection on release, so one the server dropped
//! mid-transaction is closed too. A dropped connection rolls its transaction
//! back on the server, so a write either committed before it was
//! acknowledged or did not happen. Reads keyed by a caller's owner filter on
//! it in SQL, so another owner's task costs what an unknown id costs.
//!
//! Neither errors nor `Debug` output show the password.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use agentgate_backend::{Millis, Owner, TaskId, TaskPhase};
use async_trait::async_trait;
use serde::de::DeserializeOwned;
use serde_json::Value;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions, PgRow};
use sqlx::types::Json;
use sqlx::{ConnectOptions as _, Connection as _, PgConnection, Row as _};
use tokio_util::sync::{CancellationToken, DropGuard};

mod group_commit;

use super::group_commit::WriteQueue;

use super::transition::visible;
use super::{
    ChangeKind, Claimed, Durability, InputAck, StoreError, StoreResult, SweepReport, TaskChange,
    TaskCount, TaskStore, fenced, redact_url,
};
use crate::task::{Fence, NewTask, Outcome, TaskRecord};

/// Tasks in a PostgreSQL database, shared by every instance that opens it.
#[derive(Clone)]
pub struct PostgresStore {
    pool: PgPool,
    /// Changes heard on [`CHANNEL`], from every instance (this one included).
    changes: tokio::sync::broadcast::Sender<TaskChange>,
    /// Where the store lives, without credentials (for `Debug`).
    label: String,
    /// Checkpoints, group-committed (see [`crate::store::group_commit`]).
    writes: WriteQueue,
    /// Stops the `LISTEN` relay when the last clone of the store is dropped;
    /// otherwise it would hold a connection (and, once the database is gone,
    /// log a reconnect failure every second) for the rest of the process.
    _relay: Arc<DropGuard>,
}

impl fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresStore")
            .field("server", &self.label)
            .field(
                "max_connections",
                &self.pool.options().get_max_connections(),
            )
            .finish()
    }
}

const LIVE: &str = "status IN ('working', 'input_required')";
/// The database server's time in Unix milliseconds, the clock of
/// `lease_server_until` (see the module docs). The statement's start:
/// earlier than any row it touches, so a lease it checks is taken as live
/// if anything a little longer, and one it grants ends a little sooner than
/// its holder counts from its request, never later.
pub(super) const SERVER_NOW: &str = "(EXTRACT(EPOCH FROM statement_timestamp()) * 1000)::BIGINT";

/// A lease length in milliseconds for SQL, capped so that adding it to
/// [`SERVER_NOW`] cannot overflow a `BIGINT` (an absurd lease lasts for
/// ever all the same).
pub(super) fn lease_ms(lease: Duration) -> i64 {
    i64::try_from(lease.as_millis())
        .unwrap_or(i64::MAX)
        .min(i64::MAX / 2)
}
/// The `NOTIFY` channel: payload `u:<task ids>` (updated; ids separated by
/// spaces) or `c:<task id>` (cancel requested). Notifications sent inside a transaction are delivered
/// on commit, so listeners never hear of a change they cannot read yet.
pub(super) const CHANNEL: &str = "agentgate_task_changes";
/// How often `open` retries a server that refuses connections.
const STARTUP_RETRY: Duration = Duration::from_millis(250);
const DEFAULT_MAX_CONNECTIONS: u32 = 10;
/// The most writer tasks of the group commit: batches in flight at once,
/// each on a connection of the pool.
const MAX_WRITERS: usize = 4;
const DEFAULT_ACQUIRE_TIMEOUT: Duration = Duration::from_secs(2);
const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(30);

impl PostgresStore {
    /// Connects to the database a `postgres://` URL names and applies
    /// migrations. See the module docs for the pool parameters it accepts.
    pub async fn open(url: &str) -> StoreResult<Self> {
        Self::open_with(url, Durability::Full).await
    }

    /// Which schema migrations the database a `postgres://` URL names has,
    /// read over one connection; nothing is ever applied.
    pub async fn migration_status(url: &str) -> StoreResult<Vec<super::MigrationState>> {
        let migrator = sqlx::migrate!("migrations/postgres");
        let (options, _, _) = parse_url(url)?;
        let mut conn = PgConnection::connect_with(&options).await?;
        let exists: bool = sqlx::query_scalar("SELECT to_regclass('_sqlx_migrations') IS NOT NULL")
            .fetch_one(&mut conn)
            .await?;
        let applied: Vec<i64> = if exists {
            sqlx::query_scalar("SELECT version FROM _sqlx_migrations WHERE success")
                .fetch_all(&mut conn)
                .await?
        } else {
            Vec::new()
        };
        let _ = conn.close().await;
        Ok(super::MigrationState::list(&migrator, &applied))
    }

    /// [`PostgresStore::open`] with the given [`Durability`]: `Full` refuses
    /// a server that acknowledges commits before they are on disk (see the
    /// module docs).
    pub async fn open_with(url: &str, durability: Durability) -> StoreResult<Self> {
        let (options, pool, startup) = parse_url(url)?;
        Self::connect_with_startup(options, pool, startup, durability).await
    }

    /// Connects with options built in code (a `search_path`, TLS files, an
    /// `after_connect` hook, …) and applies migrations, waiting up to the
    /// pool's acquire timeout for the server.
    pub async fn connect_with(options: PgConnectOptions, pool: PgPoolOptions) -> StoreResult<Self> {
        let startup = pool.get_acquire_timeout();
        Self::connect_with_startup(options, pool, startup, Durability::Full).await
    }

    async fn connect_with_startup(
        options: PgConnectOptions,
        pool: PgPoolOptions,
        startup: Duration,
        durability: Durability,
    ) -> StoreResult<Self> {
        let label = format!(
            "postgres://{}@{}:{}/{}",
            options.get_username(),
            options.get_host(),
            options.get_port(),
            options.get_database().unwrap_or_default()
        );
        let pool = pool
            // A connection sqlx still counts as inside a transaction (its
            // COMMIT or ROLLBACK failed) never serves another caller.
            .after_release(|conn, _| Box::pin(async move { Ok(!conn.is_in_transaction()) }))
            .connect_lazy_with(options.clone());
        // Wait for a server that is still starting, up to `startup`; the
        // pool's own acquire timeout is kept short for requests.
        let deadline = tokio::time::Instant::now() + startup;
        loop {
            let attempt =
                tokio::time::timeout_at(deadline, PgConnection::connect_with(&options)).await;
            match attempt {
                Ok(Ok(mut conn)) => {
                    // Before migrating: a refused server is left untouched.
                    let checked = check_durability(&mut conn, durability).await;
                    let _ = conn.close().await;
                    checked?;
                    break;
                }
                Ok(Err(e)) if tokio::time::Instant::now() + STARTUP_RETRY < deadline => {
                    tracing::debug!(error = %e, "PostgreSQL not reachable yet; retrying");
                    tokio::time::sleep(STARTUP_RETRY).await;
                }
                // Says why the last attempt failed (the pool would forget).
                Ok(Err(e)) => return Err(e.into()),
                Err(_) => return Err(sqlx::Error::PoolTimedOut.into()),
            }
        }
        sqlx::migrate!("migrations/postgres").run(&pool).await?;
        let (changes, _) = tokio::sync::broadcast::channel(1024);
        let stop = CancellationToken::new();
        // LISTEN before returning, so no change made after `open` is missed.
        match start_listening(&pool).await {
            Ok(listener) => {
                tokio::spawn(relay(listener, stop.clone(), changes.clone()));
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot LISTEN for task changes; relying on polling");
            }
        }
        Ok(Self {
            writes: WriteQueue::start(
                group_commit::PgWriter { pool: pool.clone() },
                // Half the pool at most, so reads and claims find connections.
                usize::try_from(pool.options().get_max_connections() / 2)
                    .unwrap_or(1)
                    .clamp(1, MAX_WRITERS),
            ),
            pool,
            changes,
            label,
            _relay: Arc::new(stop.drop_guard()),
        })
    }

    /// `create` and `create_claimed`: one INSERT, leased or not, committed
    /// by itself. Unlike checkpoints, creates are not group-committed here:
    /// PostgreSQL already shares one WAL flush among commits that arrive
    /// together from several connections, and a batch of inserts on one
    /// connection would run them one round trip after another (measured:
    /// slower at 16 clients, and no faster at 1).
    async fn insert(
        &self,
        mut task: NewTask,
        lease: Option<(&str, Millis)>,
    ) -> StoreResult<TaskRecord> {
        crate::store::transition::storable_new_task(&mut task);
        let mut conn = self.pool.acquire().await?;
        group_commit::insert_row(&mut conn, &task, lease).await?
    }

    /// The task if `owner` owns it: filtered in SQL, so a foreign row is
    /// never read (see the module docs).
    async fn fetch_owned(&self, owner: &Owner, id: &TaskId) -> StoreResult<Option<TaskRecord>> {
        if id.as_str().contains('\0') {
            // No task id holds a NUL, and PostgreSQL would refuse the query:
            // a client's id with one is as unknown as any other.
            return Ok(None);
        }
        let row = sqlx::query("SELECT * FROM tasks WHERE id = $1 AND owner = $2")
            .bind(id.as_str())
            .bind(owner.as_str())
            .fetch_optional(&self.pool)
            .await?;
        row.map(decode).transpose()
    }
}

/// Reads the server's `fsync` and `synchronous_commit` and refuses, under
/// [`Durability::Full`], a server that acknowledges commits before they are
/// on its disk (see the module docs).
async fn check_durability(conn: &mut PgConnection, durability: Durability) -> StoreResult<()> {
    for (setting, durable, wanted) in [
        ("fsync", &["on"][..], "on"),
        (
            "synchronous_commit",
            &["on", "local", "remote_write", "remote_apply"][..],
            "on",
        ),
    ] {
        let value: String = sqlx::query_scalar(&format!("SHOW {setting}"))
            .fetch_one(&mut *conn)
            .await?;
        if durable.contains(&value.as_str()) {
            continue;
        }
        match durability {
            Durability::Full => {
                return Err(StoreError::NotDurable {
                    setting,
                    value,
                    wanted,
                });
            }
            Durability::Relaxed => tracing::warn!(
                setting,
                value = %value,
                "PostgreSQL acknowledges commits before they are on disk; served anyway \
                 (store durability \"relaxed\")"
            ),
        }
    }
    Ok(())
}

/// Splits a store URL into sqlx's connect options and our pool settings.
fn parse_url(url: &str) -> StoreResult<(PgConnectOptions, PgPoolOptions, Duration)> {
    let invalid = |reason: String| StoreError::InvalidUrl {
        url: redact_url(url),
        reason,
    };
    let mut parsed = url::Url::parse(url).map_err(|e| invalid(e.to_string()))?;
    let mut max_connections = DEFAULT_MAX_CONNECTIONS;
    let mut acquire_timeout = DEFAULT_ACQUIRE_TIMEOUT;
    let mut startup_timeout = DEFAULT_STARTUP_TIMEOUT;
    let mut kept = Vec::new();
    for (key, value) in parsed.query_pairs() {
        match &*key {
            "max_connections" => {
                max_connections = value.parse().ok().filter(|n| *n > 0).ok_or_else(|| {
                    invalid(format!(
                        "max_connections must be a positive integer, not `{value}`"
                    ))
                })?;
            }
            "acquire_timeout" | "startup_timeout" => {
                let secs = value
                    .parse()
                    .ok()
                    .filter(|secs: &f64| secs.is_finite() && *secs > 0.0 && *secs < 1e9)
                    .map(Duration::from_secs_f64)
                    .ok_or_else(|| {
                        invalid(format!(
                            "{key} must be a positive number of seconds, not `{value}`"
                        ))
                    })?;
                if key == "acquire_timeout" {
                    acquire_timeout = secs;
                } else {
                    startup_timeout = secs;
                }
            }
            _ => kept.push((key.into_owned(), value.into_owned())),
        }
    }
    if kept.is_empty() {
        parsed.set_query(None);
    } else {
        parsed.query_pairs_mut().clear().extend_pairs(kept);
    }
    let options = PgConnectOptions::from_url(&parsed).map_err(|e| invalid(e.to_string()))?;
    let pool = PgPoolOptions::new()
        .max_connections(max_connections)
        .acquire_timeout(acquire_timeout);
    Ok((options, pool, startup_timeout))
}

async fn start_listening(pool: &PgPool) -> Result<sqlx::postgres::PgListener, sqlx::Error> {
    let mut listener = sqlx::postgres::PgListener::connect_with(pool).await?;
    listener.listen(CHANNEL).await?;
    Ok(listener)
}

/// Relays `NOTIFY`s on [`CHANNEL`] to `changes` until `stop`. sqlx's
/// listener reconnects (and listens again) by itself; if listening cannot
/// start at all, instances still see each other's changes through the
/// engine's store polling, only later.
async fn relay(
    mut listener: sqlx::postgres::PgListener,
    stop: CancellationToken,
    changes: tokio::sync::broadcast::Sender<TaskChange>,
) {
    loop {
        let heard = tokio::select! {
            () = stop.cancelled() => return,
            heard = listener.recv() => heard,
        };
        match heard {
            Ok(note) => {
                let payload = note.payload();
                let (kind, ids) = match payload.split_once(':') {
                    Some(("c", ids)) => (ChangeKind::CancelRequested, ids),
                    Some((_, ids)) => (ChangeKind::Updated, ids),
                    None => continue,
                };
                // One notice may name several tasks (a batch of checkpoints).
                for id in ids.split(' ') {
                    let task = TaskId::from_client(id);
                    // No receiver yet (the engine subscribes at start) is fine.
                    let _ = changes.send(TaskChange { task, kind });
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "task change listener failed; retrying");
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(Duration::from_secs(1)) => {}
                }
            }
        }
    }
}

/// Queues a change notice (sent on commit when `executor` is a transaction).
async fn notify<'e, E: sqlx::PgExecutor<'e>>(
    executor: E,
    kind: ChangeKind,
    id: &TaskId,
) -> StoreResult<()> {
    let tag = match kind {
        ChangeKind::Updated => "u",
        ChangeKind::CancelRequested => "c",
    };
    sqlx::query("SELECT pg_notify($1, $2)")
        .bind(CHANNEL)
        .bind(format!("{tag}:{id}"))
        .execute(executor)
        .await?;
    Ok(())
}

/// Reads a JSON column into the record's type, or says which column is bad.
fn typed<T: DeserializeOwned>(id: &str, column: &str, value: Value) -> StoreResult<T> {
    serde_json::from_value(value).map_err(|e| StoreError::Corrupt {
        task: id.to_owned(),
        reason: format!("column {column}: {e}"),
    })
}

fn decode(row: PgRow) -> StoreResult<TaskRecord> {
    let id: String = row.try_get("id")?;
    let status_raw: String = row.try_get("status")?;
    let status = TaskPhase::parse(&status_raw).ok_or_else(|| StoreError::Corrupt {
        task: id.clone(),
        reason: format!("status {status_raw}"),
    })?;
    Ok(TaskRecord {
        owner: Owner::new(row.try_get::<String, _>("owner")?),
        tool: row.try_get("tool")?,
        args: row.try_get("args")?,
        status,
        status_message: row.try_get("status_message")?,
        job_state: row.try_get("job_state")?,
        input_requests: typed(&id, "input_requests", row.try_get("input_requests")?)?,
        input_responses: typed(&id, "input_responses", row.try_get("input_responses")?)?,
        used_input_keys: typed(&id, "used_input_keys", row.try_get("used_input_keys")?)?,
        cancel_requested: row.try_get("cancel_requested")?,
        result: row.try_get("result")?,
        error: row.try_get("error")?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
        ttl_ms: row
            .try_get::<Option<i64>, _>("ttl_ms")?
            .map(|v| u64::try_from(v).unwrap_or(0)),
        expires_at: row.try_get("expires_at")?,
        due_at: row.try_get("due_at")?,
        lease_owner: row.try_get("lease_owner")?,
        lease_until: row.try_get("lease_until")?,
        fence: row.try_get("fence")?,
        steps: row.try_get("steps")?,
        failures: row.try_get("failures")?,
        id: TaskId::from_client(id),
    })
}

#[async_trait]
impl TaskStore for PostgresStore {
    async fn create(&self, task: NewTask) -> StoreResult<TaskRecord> {
        self.insert(task, None).await
    }

    async fn create_claimed(
        &self,
        task: NewTask,
        worker: &str,
        lease: Duration,
    ) -> StoreResult<TaskRecord> {
        let until = task.now.saturating_add(lease);
        self.insert(task, Some((worker, until))).await
    }

    async fn get(
        &self,
        owner: &Owner,
        id: &TaskId,
        now: Millis,
    ) -> StoreResult<Option<TaskRecord>> {
        Ok(self
            .fetch_owned(owner, id)
            .await?
            .filter(|r| visible(r, owner, now)))
    }

    async fn record_input(
        &self,
        owner: &Owner,
        id: &TaskId,
        responses: BTreeMap<String, Value>,
        now: Millis,
    ) -> StoreResult<InputAck> {
        if id.as_str().contains('\0') {
            // As in `fetch_owned`: no task has this id.
            return Err(StoreError::NotFound);
        }
        let mut tx = self.pool.begin().await?;
        // Filtered by owner in SQL: another principal's task is neither
        // locked nor decoded, so it costs what an unknown id costs.
        let row = sqlx::query("SELECT * FROM tasks WHERE id = $1 AND owner = $2 FOR UPDATE")
            .bind(id.as_str())
            .bind(owner.as_str())
            .fetch_optional(&mut *tx)
            .await?;
        let mut task = match row.map(decode).transpose()? {
            Some(task) if visible(&task, owner, now) => task,
            _ => {
                tx.rollback().await?;
                return Err(StoreError::NotFound);
            }
        };
        if task.status != TaskPhase::InputRequired {
            tx.rollback().await?;
            return Ok(InputAck::default());
        }
        let InputAck { accepted, complete } =
            super::transition::accept_input(&mut task, responses, now);
        if !accepted.is_empty() {
            let (status, due) = if complete {
                (TaskPhase::Working, Some(now))
            } else {
                (TaskPhase::InputRequired, task.due_at)
            };
            sqlx::query(
                "UPDATE tasks SET input_requests = $1, input_responses = $2, status = $3, \
                 due_at = $4, updated_at = $5, expires_at = $7 WHERE id = $6",
            )
            .bind(Json(&task.input_requests))
            .bind(Json(&task.input_responses))
            .bind(status.as_str())
            .bind(due)
            .bind(now)
            .bind(id.as_str())
            .bind(task.expires_at)
            .execute(&mut *tx)
            .await?;
            notify(&mut *tx, ChangeKind::Updated, id).await?;
        }
        tx.commit().await?;
        Ok(InputAck { accepted, complete })
    }

    async fn request_cancel(&self, owner: &Owner, id: &TaskId, now: Millis) -> StoreResult<()> {
        let Some(task) = self.get(owner, id, now).await? else {
            return Err(StoreError::NotFound);
        };
        if task.status.is_terminal() {
            return Ok(());
        }
        sqlx::query(&format!(
            "UPDATE tasks SET cancel_requested = TRUE, due_at = $1, updated_at = $1 \
             WHERE id = $2 AND {LIVE}"
        ))
        .bind(now)
        .bind(id.as_str())
        .execute(&self.pool)
        .await?;
        notify(&self.pool, ChangeKind::CancelRequested, id).await?;
        Ok(())
    }

    async fn claim(
        &self,
        worker: &str,
        limit: usize,
        lease: Duration,
        now: Millis,
    ) -> StoreResult<Vec<Claimed>> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        // SKIP LOCKED: rows another instance is claiming right now are passed
        // over; rows it has claimed since our snapshot fail the re-check.
        // RETURNING shows new values only, so the lease being replaced is
        // read in `due` (under the row lock, so it is the one replaced).
        // A lease runs out by the caller's clock (`runnable_at`) and by the
        // server's (see the module docs): a caller whose clock runs ahead
        // takes no live lease.
        let rows = sqlx::query(&format!(
            "WITH due AS (SELECT id, lease_owner AS previous_owner FROM tasks \
             WHERE runnable_at <= $3 \
             AND (lease_server_until IS NULL OR lease_server_until <= {SERVER_NOW}) \
             ORDER BY runnable_at LIMIT $4 FOR UPDATE SKIP LOCKED) \
             UPDATE tasks SET lease_owner = $1, lease_until = $2, \
             lease_server_until = {SERVER_NOW} + $5, fence = tasks.fence + 1 \
             FROM due WHERE tasks.id = due.id RETURNING tasks.*, due.previous_owner",
        ))
        // Planned each time: a prepared claim's generic plan, costed while
        // the table was small, joins `due` back to `tasks` by a sequential
        // scan, and would keep doing so on that connection as the table
        // grows (see the group commit's `update`).
        .persistent(false)
        .bind(worker)
        .bind(now.saturating_add(lease))
        .bind(now)
        .bind(i64::try_from(limit).unwrap_or(i64::MAX))
        .bind(lease_ms(lease))
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter()
            .map(|row| {
                let taken_over_from = row.try_get("previous_owner")?;
                Ok(Claimed {
                    task: decode(row)?,
                    taken_over_from,
                })
            })
            .collect()
    }

    async fn heartbeat(
        &self,
        id: &TaskId,
        worker: &str,
        fence: Fence,
        lease: Duration,
        now: Millis,
    ) -> StoreResult<()> {
        let done = sqlx::query(&format!(
            "UPDATE tasks SET lease_until = $1, lease_server_until = {SERVER_NOW} + $5 \
             WHERE id = $2 AND lease_owner = $3 AND fence = $4",
        ))
        .bind(now.saturating_add(lease))
        .bind(id.as_str())
        .bind(worker)
        .bind(fence)
        .bind(lease_ms(lease))
        .execute(&self.pool)
        .await?;
        fenced(done.rows_affected(), id)
    }

    async fn checkpoint(
        &self,
        id: &TaskId,
        worker: &str,
        fence: Fence,
        outcome: Outcome,
        now: Millis,
    ) -> StoreResult<TaskRecord> {
        self.writes
            .checkpoint(id, worker, fence, outcome, now)
            .await
    }

    async fn release(
        &self,
        id: &TaskId,
        worker: &str,
        fence: Fence,
        now: Millis,
    ) -> StoreResult<()> {
        let done = sqlx::query(
            "UPDATE tasks SET lease_owner = NULL, lease_until = NULL, lease_server_until = NULL, \
             due_at = CASE WHEN due_at IS NULL THEN NULL ELSE LEAST(due_at, $1) END \
             WHERE id = $2 AND lease_owner = $3 AND fence = $4",
        )
        .bind(now)
        .bind(id.as_str())
        .bind(worker)
        .bind(fence)
        .execute(&self.pool)
        .await?;
        fenced(done.rows_affected(), id)
    }

    async fn nudge(&self, id: &TaskId, now: Millis) -> StoreResult<bool> {
        let done = sqlx::query(
            "UPDATE tasks SET due_at = $1 WHERE id = $2 AND status = 'working' \
             AND due_at > $1 AND (lease_until IS NULL OR lease_until <= $1)",
        )
        .bind(now)
        .bind(id.as_str())
        .execute(&self.pool)
        .await?;
        let nudged = done.rows_affected() == 1;
        if nudged {
            notify(&self.pool, ChangeKind::Updated, id).await?;
        }
        Ok(nudged)
    }

    async fn release_all(&self, worker: &str, now: Millis) -> StoreResult<u64> {
        // Not LEAST(due_at, $1) alone: LEAST ignores NULLs, and a task waiting
        // for input must stay not due.
        let done = sqlx::query(
            "UPDATE tasks SET lease_owner = NULL, lease_until = NULL, lease_server_until = NULL, \
             due_at = CASE WHEN due_at IS NULL THEN NULL ELSE LEAST(due_at, $1) END \
             WHERE lease_owner = $2",
        )
        .bind(now)
        .bind(worker)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected())
    }

    async fn next_due(&self) -> StoreResult<Option<Millis>> {
        // The first entry of the `runnable_at` index (migration 0003).
        let due: Option<Millis> =
            sqlx::query_scalar("SELECT MIN(runnable_at) FROM tasks WHERE runnable_at IS NOT NULL")
                .fetch_one(&self.pool)
                .await?;
        Ok(due)
    }

    async fn count_by_tool_and_status(&self) -> StoreResult<Vec<TaskCount>> {
        let rows: Vec<(String, String, i64)> =
            sqlx::query_as("SELECT tool, status, COUNT(*) FROM tasks GROUP BY tool, status")
                .fetch_all(&self.pool)
                .await?;
        rows.into_iter().map(super::task_count).collect()
    }

    async fn count_active(&self, owner: &Owner, now: Millis, at_most: u64) -> StoreResult<u64> {
        // From `tasks_owner_live_expiry` (migration 0003), and no further
        // than `at_most` entries.
        let count: i64 = sqlx::query_scalar(&format!(
            "SELECT COUNT(*) FROM (SELECT 1 FROM tasks WHERE owner = $1 AND {LIVE} \
             AND (expires_at IS NULL OR expires_at > $2) LIMIT $3) AS live"
        ))
        .bind(owner.as_str())
        .bind(now)
        .bind(i64::try_from(at_most).unwrap_or(i64::MAX))
        .fetch_one(&self.pool)
        .await?;
        Ok(u64::try_from(count).unwrap_or(0))
    }

    async fn list(
        &self,
        owner: &Owner,
        now: Millis,
        after: Option<&super::ListCursor>,
        limit: u32,
    ) -> StoreResult<Vec<TaskRecord>> {
        // Two statements rather than `… IS NULL OR …`, which would keep the
        // planner from starting the index range at the cursor. Ids compare
        // byte by byte (`COLLATE "C"`, as the index does), whatever the
        // database's locale: the order is the same on every store.
        let sql = match after {
            None => {
                "SELECT * FROM tasks WHERE owner = $1 AND (expires_at IS NULL OR expires_at > $2) \
                 ORDER BY created_at DESC, id COLLATE \"C\" DESC LIMIT $3"
            }
            Some(_) => {
                "SELECT * FROM tasks WHERE owner = $1 AND (expires_at IS NULL OR expires_at > $2) \
                 AND (created_at, id COLLATE \"C\") < ($4, $5 COLLATE \"C\") \
                 ORDER BY created_at DESC, id COLLATE \"C\" DESC LIMIT $3"
            }
        };
        let mut query = sqlx::query(sql)
            .bind(owner.as_str())
            .bind(now)
            .bind(i64::from(limit));
        if let Some(after) = after {
            query = query.bind(after.created_at).bind(after.id.as_str());
        }
        let rows = query.fetch_all(&self.pool).await?;
        rows.into_iter().map(decode).collect()
    }

    async fn stored_usage(&self, owner: &Owner, at_most: u64) -> StoreResult<super::StoredUsage> {
        // An index-only scan of `tasks_owner_stored` (migration 0006, which
        // holds each row's `stored_bytes`), no further than `at_most` entries.
        let (tasks, bytes): (i64, i64) = sqlx::query_as(
            "SELECT COUNT(*), COALESCE(SUM(stored_bytes), 0)::BIGINT FROM \
             (SELECT stored_bytes FROM tasks WHERE owner = $1 LIMIT $2) AS owned",
        )
        .bind(owner.as_str())
        .bind(i64::try_from(at_most).unwrap_or(i64::MAX))
        .fetch_one(&self.pool)
        .await?;
        Ok(super::StoredUsage {
            tasks: u64::try_from(tasks).unwrap_or(0),
            bytes: u64::try_from(bytes).unwrap_or(0),
        })
    }

    async fn history(
        &self,
        owner: &Owner,
        id: &TaskId,
        now: Millis,
    ) -> StoreResult<Option<Vec<super::TaskEvent>>> {
        // The task's own visibility rules first (owner, expiry).
        if self.get(owner, id, now).await?.is_none() {
            return Ok(None);
        }
        let rows = sqlx::query_as(
            "SELECT seq, at, kind, worker, status, message FROM task_events \
             WHERE task_id = $1 ORDER BY seq",
        )
        .bind(id.as_str())
        .fetch_all(&self.pool)
        .await?;
        super::decode_events(id, rows).map(Some)
    }

    async fn oldest_ended(&self, owner: &Owner) -> StoreResult<Option<Millis>> {
        // The first entry of each ended status in `tasks_owner_stored`:
        // three index probes. (Asked for the minimum over all ended tasks,
        // the planner may walk `tasks_updated` from the oldest task of
        // anyone instead, as far as it takes to meet one of the owner's.)
        let first = |status: &str| {
            format!(
                "(SELECT updated_at FROM tasks WHERE owner = $1 AND status = '{status}' \
                 ORDER BY updated_at LIMIT 1)"
            )
        };
        let oldest: Option<Millis> = sqlx::query_scalar(&format!(
            "SELECT LEAST({}, {}, {})",
            first("completed"),
            first("failed"),
            first("cancelled")
        ))
        .bind(owner.as_str())
        .fetch_one(&self.pool)
        .await?;
        Ok(oldest)
    }

    async fn sweep(
        &self,
        now: Millis,
        retention: Duration,
        max_lifetime: Option<Duration>,
    ) -> StoreResult<SweepReport> {
        // Created before this, a live task has outlived `max_lifetime`.
        let born_before = max_lifetime.map(|max| now.saturating_sub(max));
        let expired: Vec<String> = sqlx::query_scalar(&format!(
            "UPDATE tasks SET cancel_requested = TRUE, due_at = $1, status_message = $2, \
             expires_at = $1, updated_at = $1 \
             WHERE {LIVE} AND NOT cancel_requested \
             AND (expires_at <= $1 OR created_at <= $3) RETURNING id"
        ))
        .bind(now)
        .bind(super::transition::EXPIRING)
        .bind(born_before)
        .fetch_all(&self.pool)
        .await?;
        // The instance running a step of one stops it, as for a client's cancel.
        for id in &expired {
            notify(
                &self.pool,
                ChangeKind::CancelRequested,
                &TaskId::from_client(id.clone()),
            )
            .await?;
        }
        let cutoff = now.saturating_sub(retention);
        let deleted = sqlx::query(&format!(
            "DELETE FROM tasks WHERE NOT ({LIVE}) AND (updated_at <= $1 OR expires_at <= $1)"
        ))
        .bind(cutoff)
        .execute(&self.pool)
        .await?
        .rows_affected();
        Ok(SweepReport {
            expired: u64::try_from(expired.len()).unwrap_or(u64::MAX),
            deleted,
        })
    }

    fn changes(&self) -> Option<tokio::sync::broadcast::Receiver<TaskChange>> {
        Some(self.changes.subscribe())
    }

    async fn secret(&self, name: &str, fresh: Vec<u8>) -> StoreResult<Vec<u8>> {
        // Whoever inserts first wins; everyone then reads the winner's value.
        sqlx::query(
            "INSERT INTO secrets (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING",
        )
        .bind(name)
        .bind(&fresh)
        .execute(&self.pool)
        .await?;
        let value: Vec<u8> = sqlx::query_scalar("SELECT value FROM secrets WHERE name = $1")
            .bind(name)
            .fetch_one(&self.pool)
            .await?;
        Ok(value)
    }

    async fn replace_secret(&self, name: &str, old: &[u8], new: Vec<u8>) -> StoreResult<bool> {
        let done = sqlx::query("UPDATE secrets SET value = $1 WHERE name = $2 AND value = $3")
            .bind(&new)
            .bind(name)
            .bind(old)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn bind_upstream_id(
        &self,
        namespace: &str,
        id: &str,
        owner: &Owner,
        now: Millis,
    ) -> StoreResult<Owner> {
        // An agent's id may hold a NUL, which PostgreSQL refuses in text.
        let (namespace, id) = (
            &*crate::store::transition::storable_str(namespace),
            &*crate::store::transition::storable_str(id),
        );
        // Whoever inserts first owns the id; everyone then reads the winner.
        sqlx::query(
            "INSERT INTO upstream_ids (namespace, upstream_id, owner, created_at) \
             VALUES ($1, $2, $3, $4) ON CONFLICT (namespace, upstream_id) DO NOTHING",
        )
        .bind(namespace)
        .bind(id)
        .bind(owner.as_str())
        .bind(now)
        .execute(&self.pool)
        .await?;
        self.upstream_id_owner(namespace, id)
            .await?
            .ok_or_else(|| StoreError::Corrupt {
                task: format!("upstream id {namespace}/{id}"),
                reason: "it vanished right after it was bound".into(),
            })
    }

    async fn upstream_id_owner(&self, namespace: &str, id: &str) -> StoreResult<Option<Owner>> {
        let (namespace, id) = (
            &*crate::store::transition::storable_str(namespace),
            &*crate::store::transition::storable_str(id),
        );
        let bound: Option<String> = sqlx::query_scalar(
            "SELECT owner FROM upstream_ids WHERE namespace = $1 AND upstream_id = $2",
        )
        .bind(namespace)
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        Ok(bound.map(Owner::new))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_settings_are_read_from_the_url_and_removed() {
        let (options, pool, startup) = parse_url(
            "postgres://app:pw@db.internal:6543/tasks?max_connections=3&sslmode=disable&acquire_timeout=2.5&startup_timeout=7",
        )
        .expect("parse");
        assert_eq!(pool.get_max_connections(), 3);
        assert_eq!(pool.get_acquire_timeout(), Duration::from_millis(2_500));
        assert_eq!(startup, Duration::from_secs(7));
        assert_eq!(options.get_host(), "db.internal");
        assert_eq!(options.get_port(), 6543);
        assert_eq!(options.get_database(), Some("tasks"));

        let (_, pool, startup) = parse_url("postgresql://app@db/tasks").expect("parse");
        assert_eq!(pool.get_max_connections(), DEFAULT_MAX_CONNECTIONS);
        assert_eq!(pool.get_acquire_timeout(), DEFAULT_ACQUIRE_TIMEOUT);
        assert_eq!(startup, DEFAULT_STARTUP_TIMEOUT);
    }

    #[test]
    fn bad_pool_settings_are_refused_without_showing_the_password() {
        for url in [
            "postgres://app:hunter2@db/tasks?max_connections=0",
            "postgres://app:hunter2@db/tasks?max_connections=lots",
            "postgres://app:hunter2@db/tasks?acquire_timeout=-1",
            "postgres://app@db/tasks?password=hunter2&acquire_timeout=never",
            "postgres://app:hunter2@db/tasks?startup_timeout=0",
        ] {
            let err = parse_url(url).expect_err(url);
            assert!(
                matches!(err, StoreError::InvalidUrl { .. }),
                "{url}: {err:?}"
            );
            let shown = err.to_string();
            assert!(!shown.contains("hunter2"), "{shown}");
        }
    }

    #[tokio::test]
    async fn a_refused_connection_says_why_without_the_password() {
        // Port 1: nothing listens there, so the connection is refused at once.
        let err =
            PostgresStore::open("postgres://app:hunter2@127.0.0.1:1/tasks?startup_timeout=0.5")
                .await
                .expect_err("nothing listens on port 1");
        let shown = err.to_string();
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(shown.to_lowercase().contains("refused"), "{shown}");
    }
}
