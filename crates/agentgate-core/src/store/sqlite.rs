//! The embedded store: one SQLite file in WAL mode.
//!
//! Every write runs in its own `BEGIN IMMEDIATE … COMMIT` transaction on a
//! pooled connection, through [`WriteTx`], and is acknowledged only after its
//! `COMMIT` succeeded. A connection whose transaction did not end cleanly (a
//! failed statement, a failed `COMMIT` or `ROLLBACK`, a caller that went
//! away half-way) is closed instead of going back to the pool: closing it
//! rolls back whatever SQLite still holds open, so no later write can land
//! inside a transaction that will never commit. That is what keeps a full
//! disk harmless: writes are refused with [`StoreError::Unavailable`] while
//! it lasts, reads keep working (WAL), and the first write after space is
//! freed gets a fresh connection and succeeds. The pool also refuses, on
//! release, any connection sqlx still counts as inside a transaction.
//!
//! Within one process, writes take turns on an async mutex before they touch
//! SQLite. SQLite allows one writer at a time; without the mutex, concurrent
//! writers on the pool's connections meet in SQLite's busy handler, which
//! sleeps in steps of 1 to 100 ms. Measured with `agentgate-bench`, that
//! sleeping made step checkpoints, claims and creates wait for each other
//! for milliseconds. Reads never take the mutex (WAL lets them run beside the
//! writer). A second process on the same file waits for SQLite's write lock
//! (`BEGIN IMMEDIATE` under the busy timeout) instead of failing half-way.
//!
//! Creates and step checkpoints are group-committed (see
//! [`crate::store::group_commit`]): those that queue up while one batch
//! commits are saved in the next single transaction, so the write turn is
//! taken once per batch, not once per write.
//!
//! **Durability.** WAL with `synchronous = FULL` by default
//! ([`Durability::Full`]): a commit is acknowledged only after the WAL was
//! synced to disk, so neither a killed process nor a power cut or kernel
//! crash loses an acknowledged write. SQLite documents that a WAL commit
//! survives a power loss only with `FULL`. The sync is paid once per
//! group-committed batch, not once per write. [`Durability::Relaxed`] runs
//! `synchronous = NORMAL`: a commit is in the WAL file when it is
//! acknowledged (a killed process loses nothing), but the WAL is synced
//! only at SQLite's checkpoints (about every 1000 pages), so a power cut
//! can roll the database back to an earlier consistent state, losing the
//! last acknowledged creates, answers and results. The power-cut test in
//! `tests/external/store_faults.rs` shows both.
//!
//! Reads that take a caller's owner filter on it in SQL, so another owner's
//! task costs the same as an id that does not exist: no row is decoded.

use std::collections::{BTreeMap, HashMap};
use std::str::FromStr;
use std::time::Duration;

use agentgate_backend::{Millis, Owner, TaskId, TaskPhase};
use async_trait::async_trait;
use serde_json::Value;
use sqlx::pool::PoolConnection;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteConnection, SqliteJournalMode, SqlitePoolOptions, SqliteRow,
    SqliteSynchronous,
};
use sqlx::{ConnectOptions as _, Connection as _, Row as _, Sqlite, SqlitePool};
use tokio::sync::OwnedMutexGuard;

use super::group_commit::{SaveBatch, Write, WriteQueue, decide, in_batch_order};
use super::transition::visible;
use super::{
    Claimed, Durability, InputAck, StoreError, StoreResult, SweepReport, TaskCount, TaskStore,
    fenced,
};
use crate::task::{Fence, NewTask, Outcome, TaskRecord};

/// Tasks in a SQLite database file.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    db: Db,
    /// Creates and checkpoints, group-committed (see
    /// [`crate::store::group_commit`]).
    writes: WriteQueue,
}

/// The database: what the store and its checkpoint writer share.
#[derive(Debug, Clone)]
struct Db {
    pool: SqlitePool,
    /// Taken by every write (see the module docs).
    write: std::sync::Arc<tokio::sync::Mutex<()>>,
}

const LIVE: &str = "status IN ('working', 'input_required')";

impl SqliteStore {
    /// Which schema migrations the database a `sqlite:` URL names has,
    /// read-only: a file that does not exist has none (and is not
    /// created), and nothing is ever applied.
    pub async fn migration_status(url: &str) -> StoreResult<Vec<super::MigrationState>> {
        let migrator = sqlx::migrate!("migrations/sqlite");
        let options = SqliteConnectOptions::from_str(url).map_err(|e| StoreError::InvalidUrl {
            url: url.to_owned(),
            reason: e.to_string(),
        })?;
        let applied: Vec<i64> = if url.contains(":memory:") || !options.get_filename().exists() {
            Vec::new()
        } else {
            let mut conn = options
                .read_only(true)
                .create_if_missing(false)
                .connect()
                .await?;
            let table: Option<String> = sqlx::query_scalar(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name = '_sqlx_migrations'",
            )
            .fetch_optional(&mut conn)
            .await?;
            let applied = match table {
                Some(_) => {
                    sqlx::query_scalar("SELECT version FROM _sqlx_migrations WHERE success")
                        .fetch_all(&mut conn)
                        .await?
                }
                None => Vec::new(),
            };
            let _ = conn.close().await;
            applied
        };
        Ok(super::MigrationState::list(&migrator, &applied))
    }

    /// Opens (creating if needed) the database a `sqlite:` URL names and
    /// applies migrations. `sqlite::memory:` gives a private in-memory store.
    /// Writes are acknowledged once on disk ([`Durability::Full`]).
    pub async fn open(url: &str) -> StoreResult<Self> {
        Self::open_with(url, Durability::Full).await
    }

    /// [`SqliteStore::open`] with the given [`Durability`] (see the module
    /// docs for what each costs and risks).
    pub async fn open_with(url: &str, durability: Durability) -> StoreResult<Self> {
        let in_memory = url.contains(":memory:");
        let mut options =
            SqliteConnectOptions::from_str(url).map_err(|e| StoreError::InvalidUrl {
                url: url.to_owned(),
                reason: e.to_string(),
            })?;
        if !in_memory {
            let path = options.get_filename().to_path_buf();
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty())
                && !dir.is_dir()
            {
                return Err(StoreError::MissingDirectory {
                    path: dir.display().to_string(),
                });
            }
            create_private_file(&path)?;
            options = options
                .journal_mode(SqliteJournalMode::Wal)
                .synchronous(match durability {
                    // The WAL is synced before each COMMIT returns.
                    Durability::Full => SqliteSynchronous::Full,
                    // Synced at SQLite's checkpoints only.
                    Durability::Relaxed => SqliteSynchronous::Normal,
                });
        }
        options = options
            .create_if_missing(true)
            .busy_timeout(Duration::from_secs(10))
            .foreign_keys(true);
        // An in-memory database exists per connection: keep exactly one.
        let max = if in_memory { 1 } else { 8 };
        let pool = SqlitePoolOptions::new()
            .max_connections(max)
            .min_connections(if in_memory { 1 } else { 0 })
            .idle_timeout(None)
            .max_lifetime(None)
            // No ping before each acquire: a SQLite connection is a file
            // handle in this process and does not go stale, and sqlx closes
            // the connection of an acquire dropped during its ping, which
            // for an in-memory store is the database itself.
            .test_before_acquire(false)
            // A connection sqlx still counts as inside a transaction (one
            // whose COMMIT or ROLLBACK failed) never serves another caller.
            .after_release(|conn, _| Box::pin(async move { Ok(!conn.is_in_transaction()) }))
            .connect_with(options)
            .await?;
        sqlx::migrate!("migrations/sqlite").run(&pool).await?;
        let db = Db {
            pool,
            write: std::sync::Arc::default(),
        };
        Ok(Self {
            // SQLite has one writer at a time: one writer task.
            writes: WriteQueue::start(db.clone(), 1),
            db,
        })
    }

    /// The task if `owner` owns it: filtered in SQL, so a foreign row is
    /// never read (see the module docs).
    async fn fetch_owned(&self, owner: &Owner, id: &TaskId) -> StoreResult<Option<TaskRecord>> {
        let row = sqlx::query("SELECT * FROM tasks WHERE id = ? AND owner = ?")
            .bind(id.as_str())
            .bind(owner.as_str())
            .fetch_optional(&self.db.pool)
            .await?;
        row.map(decode).transpose()
    }

    /// `create` and `create_claimed`: one INSERT, leased or not, with the
    /// next batch of writes.
    async fn insert(
        &self,
        mut task: NewTask,
        lease: Option<(&str, Millis)>,
    ) -> StoreResult<TaskRecord> {
        super::transition::storable_new_task(&mut task);
        self.writes.insert(task, lease).await
    }
}

/// Inserts one new task in `conn`'s transaction. The outer `Err` is the
/// database's (it aborts the batch); the inner one a row that does not decode.
async fn insert_row(
    conn: &mut SqliteConnection,
    task: &NewTask,
    lease: Option<(&str, Millis)>,
) -> StoreResult<StoreResult<TaskRecord>> {
    let row = sqlx::query(
        "INSERT INTO tasks (id, owner, tool, args, status, status_message, created_at, \
         updated_at, ttl_ms, expires_at, due_at, lease_owner, lease_until, fence) \
         VALUES (?, ?, ?, ?, 'working', ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING *",
    )
    .bind(task.id.as_str())
    .bind(task.owner.as_str())
    .bind(&task.tool)
    .bind(json_text(&task.args))
    .bind(&task.status_message)
    .bind(task.now)
    .bind(task.now)
    .bind(task.ttl_ms.map(|t| i64::try_from(t).unwrap_or(i64::MAX)))
    .bind(task.expires_at())
    .bind(task.now)
    .bind(lease.map(|(worker, _)| worker))
    .bind(lease.map(|(_, until)| until))
    .bind(i64::from(lease.is_some()))
    .fetch_one(conn)
    .await?;
    Ok(decode(row))
}

impl Db {
    /// Starts a write: takes this process's write turn, then opens a
    /// `BEGIN IMMEDIATE` transaction on a pooled connection.
    async fn write(&self) -> StoreResult<WriteTx> {
        let turn = self.write.clone().lock_owned().await;
        // Open before `BEGIN` is sent: sqlx runs the statement on its worker
        // thread even if this future is dropped meanwhile (a step
        // interrupted by a cancel), so a dropped `WriteTx` must roll back.
        let mut tx = WriteTx {
            held: Some((turn, self.pool.acquire().await?)),
            open: true,
        };
        sqlx::query("BEGIN IMMEDIATE").execute(tx.conn()).await?;
        Ok(tx)
    }
}

/// A batch of creates and checkpoints in one write transaction (the
/// batching itself is [`crate::store::group_commit`]).
#[async_trait]
impl SaveBatch for Db {
    async fn save(&self, batch: &[Write]) -> StoreResult<Vec<StoreResult<TaskRecord>>> {
        let mut tx = self.write().await?;
        match save_batch(&mut tx, batch).await {
            Ok(results) => {
                tx.commit().await?;
                Ok(results)
            }
            Err(e) => {
                // Rolled back, the connection is clean and stays in the pool
                // (an in-memory database lives only as long as it); if the
                // rollback fails, dropping `tx` tries once more, then closes it.
                let _ = tx.rollback().await;
                Err(e)
            }
        }
    }
}

/// The statements of a batch (see [`SaveBatch::save`]), in its transaction.
async fn save_batch(
    tx: &mut WriteTx,
    batch: &[Write],
) -> StoreResult<Vec<StoreResult<TaskRecord>>> {
    let mut inserted = Vec::new();
    for (task, lease) in batch.iter().filter_map(Write::as_insert) {
        inserted.push(insert_row(tx.conn(), task, lease).await?);
    }
    let checkpoints: Vec<_> = batch.iter().filter_map(Write::as_checkpoint).collect();
    let mut current = HashMap::with_capacity(checkpoints.len());
    if !checkpoints.is_empty() {
        let ids = json_text(
            &checkpoints
                .iter()
                .map(|c| c.id.as_str())
                .collect::<Vec<_>>(),
        );
        let rows = sqlx::query("SELECT * FROM tasks WHERE id IN (SELECT value FROM json_each(?))")
            .bind(ids)
            .fetch_all(tx.conn())
            .await?;
        for row in rows {
            current.insert(row.try_get::<String, _>("id")?, decode(row));
        }
    }
    let decided = decide(&checkpoints, current);
    for task in &decided.writes {
        sqlx::query(
            "UPDATE tasks SET status = ?, status_message = ?, job_state = ?, \
             input_requests = ?, input_responses = ?, used_input_keys = ?, result = ?, \
             error = ?, updated_at = ?, due_at = ?, expires_at = ?, lease_owner = NULL, \
             lease_until = NULL, steps = ?, failures = ? WHERE id = ? AND fence = ?",
        )
        .bind(task.status.as_str())
        .bind(&task.status_message)
        .bind(task.job_state.as_ref().map(json_text))
        .bind(json_text(&task.input_requests))
        .bind(json_text(&task.input_responses))
        .bind(json_text(&task.used_input_keys))
        .bind(task.result.as_ref().map(json_text))
        .bind(task.error.as_ref().map(json_text))
        .bind(task.updated_at)
        .bind(task.due_at)
        .bind(task.expires_at)
        .bind(task.steps)
        .bind(task.failures)
        .bind(task.id.as_str())
        .bind(task.fence)
        .execute(tx.conn())
        .await?;
    }
    Ok(in_batch_order(batch, inserted, decided.results))
}

/// One write transaction, holding this process's write turn. It ends with
/// [`WriteTx::commit`] or [`WriteTx::rollback`]. Dropped while still open
/// (an error returned with `?`, a failed `COMMIT`, a caller that stopped
/// waiting), it is rolled back in the background before its connection goes
/// back to the pool and the turn passes on: sqlx may still be running its
/// `BEGIN` or a statement, and a connection left inside a transaction would
/// hold SQLite's write lock and fail every later `BEGIN`. A connection
/// whose rollback fails is closed instead (closing rolls back too).
struct WriteTx {
    /// Taken only by `Drop`.
    held: Option<(OwnedMutexGuard<()>, PoolConnection<Sqlite>)>,
    open: bool,
}

impl WriteTx {
    fn conn(&mut self) -> &mut SqliteConnection {
        match &mut self.held {
            Some((_, conn)) => conn,
            None => unreachable!("a WriteTx holds its connection until it is dropped"),
        }
    }

    /// Commits; the write is acknowledged only when this returns `Ok`.
    async fn commit(mut self) -> StoreResult<()> {
        sqlx::query("COMMIT").execute(self.conn()).await?;
        self.open = false;
        Ok(())
    }

    /// Rolls back a transaction that changed nothing worth keeping.
    async fn rollback(mut self) -> StoreResult<()> {
        sqlx::query("ROLLBACK").execute(self.conn()).await?;
        self.open = false;
        Ok(())
    }
}

impl Drop for WriteTx {
    fn drop(&mut self) {
        let Some((turn, mut conn)) = self.held.take() else {
            return;
        };
        if !self.open {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            conn.close_on_drop();
            return;
        };
        runtime.spawn(async move {
            // sqlx runs a connection's statements in order, so this comes
            // after whatever the dropped caller had sent.
            if let Err(e) = sqlx::query("ROLLBACK").execute(&mut *conn).await {
                // "No transaction is active": the `BEGIN` never ran, or the
                // `COMMIT` did; the connection is clean either way.
                if !e.to_string().contains("no transaction is active") {
                    tracing::warn!(error = %e, "could not roll back an abandoned write; closing its connection");
                    conn.close_on_drop();
                }
            }
            drop(conn);
            drop(turn);
        });
    }
}

/// Creates the database file readable by its owner only (it holds task
/// arguments and results), leaving an existing file as it is.
fn create_private_file(path: &std::path::Path) -> StoreResult<()> {
    let mut open = std::fs::OpenOptions::new();
    open.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        open.mode(0o600);
    }
    match open.open(path) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(source) => Err(StoreError::Io {
            path: path.display().to_string(),
            source,
        }),
    }
}

fn json_text(value: &impl serde::Serialize) -> String {
    // Serializing owned JSON values and maps of them cannot fail.
    serde_json::to_string(value).unwrap_or_else(|_| "null".to_owned())
}

fn decode(row: SqliteRow) -> StoreResult<TaskRecord> {
    let id: String = row.try_get("id")?;
    let corrupt = |reason: String| StoreError::Corrupt {
        task: id.clone(),
        reason,
    };
    let parse = |column: &str, raw: Option<String>| -> StoreResult<Option<Value>> {
        raw.map(|text| {
            serde_json::from_str(&text).map_err(|e| corrupt(format!("column {column}: {e}")))
        })
        .transpose()
    };
    let status_raw: String = row.try_get("status")?;
    let status =
        TaskPhase::parse(&status_raw).ok_or_else(|| corrupt(format!("status {status_raw}")))?;
    let map = |column: &str| -> StoreResult<BTreeMap<String, Value>> {
        let text: String = row.try_get(column)?;
        serde_json::from_str(&text).map_err(|e| corrupt(format!("column {column}: {e}")))
    };
    let used: String = row.try_get("used_input_keys")?;
    Ok(TaskRecord {
        id: TaskId::from_client(id.clone()),
        owner: Owner::new(row.try_get::<String, _>("owner")?),
        tool: row.try_get("tool")?,
        args: parse("args", Some(row.try_get("args")?))?.unwrap_or(Value::Null),
        status,
        status_message: row.try_get("status_message")?,
        job_state: parse("job_state", row.try_get("job_state")?)?,
        input_requests: map("input_requests")?,
        input_responses: map("input_responses")?,
        used_input_keys: serde_json::from_str(&used)
            .map_err(|e| corrupt(format!("column used_input_keys: {e}")))?,
        cancel_requested: row.try_get("cancel_requested")?,
        result: parse("result", row.try_get("result")?)?,
        error: parse("error", row.try_get("error")?)?,
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
    })
}

#[async_trait]
impl TaskStore for SqliteStore {
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
        let mut tx = self.db.write().await?;
        let row = sqlx::query("SELECT * FROM tasks WHERE id = ? AND owner = ?")
            .bind(id.as_str())
            .bind(owner.as_str())
            .fetch_optional(tx.conn())
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
        if accepted.is_empty() {
            tx.rollback().await?;
            return Ok(InputAck { accepted, complete });
        }
        let (status, due) = if complete {
            (TaskPhase::Working, Some(now))
        } else {
            (TaskPhase::InputRequired, task.due_at)
        };
        sqlx::query(
            "UPDATE tasks SET input_requests = ?, input_responses = ?, status = ?, \
             due_at = ?, updated_at = ?, expires_at = ? WHERE id = ?",
        )
        .bind(json_text(&task.input_requests))
        .bind(json_text(&task.input_responses))
        .bind(status.as_str())
        .bind(due)
        .bind(now)
        .bind(task.expires_at)
        .bind(id.as_str())
        .execute(tx.conn())
        .await?;
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
        let mut tx = self.db.write().await?;
        sqlx::query(&format!(
            "UPDATE tasks SET cancel_requested = 1, due_at = ?, updated_at = ? \
             WHERE id = ? AND {LIVE}"
        ))
        .bind(now)
        .bind(now)
        .bind(id.as_str())
        .execute(tx.conn())
        .await?;
        tx.commit().await
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
        // RETURNING shows new values only: the leases being replaced are read
        // first, in the same write transaction, so they are the ones replaced.
        // Both statements walk the `runnable_at` index (see migration 0003).
        let mut tx = self.db.write().await?;
        let due: Vec<(String, Option<String>)> = sqlx::query_as(
            "SELECT id, lease_owner FROM tasks WHERE runnable_at <= ? \
             ORDER BY runnable_at LIMIT ?",
        )
        .bind(now)
        .bind(i64::try_from(limit).unwrap_or(i64::MAX))
        .fetch_all(tx.conn())
        .await?;
        if due.is_empty() {
            tx.rollback().await?;
            return Ok(Vec::new());
        }
        let ids = json_text(&due.iter().map(|(id, _)| id).collect::<Vec<_>>());
        let rows = sqlx::query(
            "UPDATE tasks SET lease_owner = ?, lease_until = ?, fence = fence + 1 \
             WHERE id IN (SELECT value FROM json_each(?)) RETURNING *",
        )
        .bind(worker)
        .bind(now.saturating_add(lease))
        .bind(ids)
        .fetch_all(tx.conn())
        .await?;
        let mut previous: HashMap<String, Option<String>> = due.into_iter().collect();
        let claimed = rows
            .into_iter()
            .map(|row| {
                let task = decode(row)?;
                let taken_over_from = previous.remove(task.id.as_str()).flatten();
                Ok(Claimed {
                    task,
                    taken_over_from,
                })
            })
            .collect::<StoreResult<Vec<_>>>()?;
        tx.commit().await?;
        Ok(claimed)
    }

    async fn heartbeat(
        &self,
        id: &TaskId,
        worker: &str,
        fence: Fence,
        lease: Duration,
        now: Millis,
    ) -> StoreResult<()> {
        let mut tx = self.db.write().await?;
        let done = sqlx::query(
            "UPDATE tasks SET lease_until = ? WHERE id = ? AND lease_owner = ? AND fence = ?",
        )
        .bind(now.saturating_add(lease))
        .bind(id.as_str())
        .bind(worker)
        .bind(fence)
        .execute(tx.conn())
        .await?;
        tx.commit().await?;
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
        let mut tx = self.db.write().await?;
        let done = sqlx::query(
            "UPDATE tasks SET lease_owner = NULL, lease_until = NULL, \
             due_at = CASE WHEN due_at IS NULL THEN NULL ELSE MIN(due_at, ?) END \
             WHERE id = ? AND lease_owner = ? AND fence = ?",
        )
        .bind(now)
        .bind(id.as_str())
        .bind(worker)
        .bind(fence)
        .execute(tx.conn())
        .await?;
        tx.commit().await?;
        fenced(done.rows_affected(), id)
    }

    async fn nudge(&self, id: &TaskId, now: Millis) -> StoreResult<bool> {
        let mut tx = self.db.write().await?;
        let done = sqlx::query(
            "UPDATE tasks SET due_at = ? WHERE id = ? AND status = 'working' \
             AND due_at > ? AND (lease_until IS NULL OR lease_until <= ?)",
        )
        .bind(now)
        .bind(id.as_str())
        .bind(now)
        .bind(now)
        .execute(tx.conn())
        .await?;
        tx.commit().await?;
        Ok(done.rows_affected() == 1)
    }

    async fn release_all(&self, worker: &str, now: Millis) -> StoreResult<u64> {
        let mut tx = self.db.write().await?;
        let done = sqlx::query(
            "UPDATE tasks SET lease_owner = NULL, lease_until = NULL, \
             due_at = CASE WHEN due_at IS NULL THEN NULL ELSE MIN(due_at, ?) END \
             WHERE lease_owner = ?",
        )
        .bind(now)
        .bind(worker)
        .execute(tx.conn())
        .await?;
        tx.commit().await?;
        Ok(done.rows_affected())
    }

    async fn next_due(&self) -> StoreResult<Option<Millis>> {
        // The first entry of the `runnable_at` index (migration 0003).
        let due: Option<Millis> =
            sqlx::query_scalar("SELECT MIN(runnable_at) FROM tasks WHERE runnable_at IS NOT NULL")
                .fetch_one(&self.db.pool)
                .await?;
        Ok(due)
    }

    async fn count_by_tool_and_status(&self) -> StoreResult<Vec<TaskCount>> {
        let rows: Vec<(String, String, i64)> =
            sqlx::query_as("SELECT tool, status, COUNT(*) FROM tasks GROUP BY tool, status")
                .fetch_all(&self.db.pool)
                .await?;
        rows.into_iter().map(super::task_count).collect()
    }

    async fn count_active(&self, owner: &Owner, now: Millis, at_most: u64) -> StoreResult<u64> {
        // Index-only (`tasks_owner_live_expiry`, migration 0003), and no
        // further than `at_most` entries.
        let count: i64 = sqlx::query_scalar(&format!(
            "SELECT COUNT(*) FROM (SELECT 1 FROM tasks WHERE owner = ? AND {LIVE} \
             AND (expires_at IS NULL OR expires_at > ?) LIMIT ?)"
        ))
        .bind(owner.as_str())
        .bind(now)
        .bind(i64::try_from(at_most).unwrap_or(i64::MAX))
        .fetch_one(&self.db.pool)
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
        // planner from starting the index range at the cursor.
        let sql = match after {
            None => {
                "SELECT * FROM tasks WHERE owner = ? AND (expires_at IS NULL OR expires_at > ?) \
                 ORDER BY created_at DESC, id DESC LIMIT ?"
            }
            Some(_) => {
                "SELECT * FROM tasks WHERE owner = ? AND (expires_at IS NULL OR expires_at > ?) \
                 AND (created_at, id) < (?, ?) ORDER BY created_at DESC, id DESC LIMIT ?"
            }
        };
        let mut query = sqlx::query(sql).bind(owner.as_str()).bind(now);
        if let Some(after) = after {
            query = query.bind(after.created_at).bind(after.id.as_str());
        }
        let rows = query
            .bind(i64::from(limit))
            .fetch_all(&self.db.pool)
            .await?;
        rows.into_iter().map(decode).collect()
    }

    async fn stored_usage(&self, owner: &Owner, at_most: u64) -> StoreResult<super::StoredUsage> {
        // Index-only (`tasks_owner_stored`, migration 0006, which holds each
        // row's `stored_bytes`), and no further than `at_most` entries.
        let (tasks, bytes): (i64, i64) = sqlx::query_as(
            "SELECT COUNT(*), COALESCE(SUM(stored_bytes), 0) FROM \
             (SELECT stored_bytes FROM tasks WHERE owner = ? LIMIT ?)",
        )
        .bind(owner.as_str())
        .bind(i64::try_from(at_most).unwrap_or(i64::MAX))
        .fetch_one(&self.db.pool)
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
             WHERE task_id = ? ORDER BY seq",
        )
        .bind(id.as_str())
        .fetch_all(&self.db.pool)
        .await?;
        super::decode_events(id, rows).map(Some)
    }

    async fn oldest_ended(&self, owner: &Owner) -> StoreResult<Option<Millis>> {
        // The first entry per ended status in `tasks_owner_stored`.
        let oldest: Option<Millis> = sqlx::query_scalar(&format!(
            "SELECT MIN(updated_at) FROM tasks WHERE owner = ? AND NOT ({LIVE})"
        ))
        .bind(owner.as_str())
        .fetch_one(&self.db.pool)
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
        let mut tx = self.db.write().await?;
        let expired = sqlx::query(&format!(
            "UPDATE tasks SET cancel_requested = 1, due_at = ?1, status_message = ?2, \
             expires_at = ?1, updated_at = ?1 \
             WHERE {LIVE} AND cancel_requested = 0 \
             AND (expires_at <= ?1 OR created_at <= ?3)"
        ))
        .bind(now)
        .bind(super::transition::EXPIRING)
        .bind(born_before)
        .execute(tx.conn())
        .await?
        .rows_affected();
        let cutoff = now.saturating_sub(retention);
        let deleted = sqlx::query(&format!(
            "DELETE FROM tasks WHERE NOT ({LIVE}) AND (updated_at <= ?1 OR expires_at <= ?1)"
        ))
        .bind(cutoff)
        .execute(tx.conn())
        .await?
        .rows_affected();
        tx.commit().await?;
        Ok(SweepReport { expired, deleted })
    }

    async fn secret(&self, name: &str, fresh: Vec<u8>) -> StoreResult<Vec<u8>> {
        let mut tx = self.db.write().await?;
        sqlx::query("INSERT INTO secrets (name, value) VALUES (?, ?) ON CONFLICT(name) DO NOTHING")
            .bind(name)
            .bind(&fresh)
            .execute(tx.conn())
            .await?;
        let value: Vec<u8> = sqlx::query_scalar("SELECT value FROM secrets WHERE name = ?")
            .bind(name)
            .fetch_one(tx.conn())
            .await?;
        tx.commit().await?;
        Ok(value)
    }

    async fn replace_secret(&self, name: &str, old: &[u8], new: Vec<u8>) -> StoreResult<bool> {
        let mut tx = self.db.write().await?;
        let done = sqlx::query("UPDATE secrets SET value = ? WHERE name = ? AND value = ?")
            .bind(&new)
            .bind(name)
            .bind(old)
            .execute(tx.conn())
            .await?;
        tx.commit().await?;
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
            &*super::transition::storable_str(namespace),
            &*super::transition::storable_str(id),
        );
        let mut tx = self.db.write().await?;
        sqlx::query(
            "INSERT INTO upstream_ids (namespace, upstream_id, owner, created_at) \
             VALUES (?, ?, ?, ?) ON CONFLICT (namespace, upstream_id) DO NOTHING",
        )
        .bind(namespace)
        .bind(id)
        .bind(owner.as_str())
        .bind(now)
        .execute(tx.conn())
        .await?;
        let bound: String = sqlx::query_scalar(
            "SELECT owner FROM upstream_ids WHERE namespace = ? AND upstream_id = ?",
        )
        .bind(namespace)
        .bind(id)
        .fetch_one(tx.conn())
        .await?;
        tx.commit().await?;
        Ok(Owner::new(bound))
    }

    async fn upstream_id_owner(&self, namespace: &str, id: &str) -> StoreResult<Option<Owner>> {
        let (namespace, id) = (
            &*super::transition::storable_str(namespace),
            &*super::transition::storable_str(id),
        );
        let bound: Option<String> = sqlx::query_scalar(
            "SELECT owner FROM upstream_ids WHERE namespace = ? AND upstream_id = ?",
        )
        .bind(namespace)
        .bind(id)
        .fetch_optional(&self.db.pool)
        .await?;
        Ok(bound.map(Owner::new))
    }
}
