//! The task store: where every task lives, durably, between steps.
//!
//! One trait, [`TaskStore`], with one implementation per database, chosen by
//! the URL given to [`open`]:
//!
//! - [`SqliteStore`] (`sqlite://PATH`): one file, for a single instance.
//! - [`PostgresStore`] (`postgres://…`): one database shared by several
//!   instances; claims use `FOR UPDATE SKIP LOCKED`, so no task is handed out
//!   twice (its module docs say how claims, fencing and pool settings work).
//!
//! The state machine both apply to a step's outcome lives once, in
//! `transition`. Every implementation must honour these semantics (the shared
//! suite in `suite`, behind the `store-suite` feature, checks them, and is run against each store):
//!
//! - **Durable creation.** `create` returns only after the row is committed, so
//!   a `CreateTaskResult` is never sent for a task `get` cannot find.
//! - **Ownership.** `get`, `record_input` and `request_cancel` take the caller's
//!   [`Owner`]; a task of another owner behaves exactly like an unknown id.
//! - **Expiry.** A task past its `expires_at` is invisible to those calls:
//!   its TTL after its last progress (creation, an answer, a step that got
//!   somewhere; see `transition::apply`), not after its creation.
//! - **Input keys** are unique per task: `record_input` accepts an answer only
//!   for a key that is currently outstanding; unknown or answered keys are
//!   ignored. When the last outstanding key is answered the task becomes
//!   `working` and due at once.
//! - **Leases.** `claim` hands out due, unleased (or lease-expired) tasks and
//!   takes the next [`Fence`], the fencing token; a claim of a lease-expired task
//!   names the worker that held it ([`Claimed::taken_over_from`]).
//!   `heartbeat` and `checkpoint` succeed only for the current worker *and*
//!   fence; otherwise they return [`StoreError::LeaseLost`] and change
//!   nothing.
//! - **Lease clocks.** Leases are given by length (`claim`, `heartbeat`,
//!   `create_claimed`) and end `lease` after the caller's `now`
//!   (`lease_until`). A store shared by several hosts also ends them on a
//!   clock of its own and takes a lease over only once it ran out on both,
//!   so an instance whose clock runs ahead cannot take a live lease:
//!   PostgreSQL uses the database server's clock (see its module docs);
//!   SQLite serves one host, whose clock is the only one. So a lease may
//!   outlive the caller's `now`, never end before it: a test that needs a
//!   lease to be over takes one of length zero.
//! - **Release.** `release` gives up one lease its caller holds (fenced like
//!   `checkpoint`) and leaves the task due at once, its state unchanged.
//! - **Write failures.** A write that returns an error was not acknowledged
//!   and left nothing half-done behind; an outage (disk full, read-only,
//!   unreachable) is [`StoreError::Unavailable`], and the store serves writes
//!   again once its cause clears, without a restart.
//! - **Cancel** is cooperative: `request_cancel` flags a live task and makes it
//!   due at once; the job decides how to end. It is a no-op on ended tasks.
//! - **Nudge** moves a waiting `working` task's `due_at` forward to now and
//!   touches nothing else; it never wakes a task that waits for input.
//! - **Active count.** `count_active` counts an owner's live tasks that `get`
//!   would still show (not past their TTL), whether or not the sweeper ran,
//!   up to the bound it is given.
//! - **Stored usage.** `stored_usage` counts every task of an owner still
//!   stored (live, ended, expired but not yet swept) and the bytes of JSON
//!   and text their rows hold, reading no further than the bound it is
//!   given; every write that changes a row's JSON changes its bytes in the
//!   same statement (migration 0006), so the numbers follow creates,
//!   checkpoints, answers and sweeps at once.
//! - **Sweep** marks live tasks past their TTL `failed` and deletes ended tasks
//!   whose last update is older than the retention window.

use std::collections::BTreeMap;
use std::time::Duration;

use agentgate_backend::{Millis, Owner, TaskId, TaskPhase};
use async_trait::async_trait;
use serde_json::Value;

use crate::task::{Fence, NewTask, Outcome, TaskRecord};

mod group_commit;
mod postgres;
pub mod seal;
mod sqlite;
#[cfg(feature = "store-suite")]
pub mod suite;
mod transition;

pub use postgres::PostgresStore;
pub use sqlite::SqliteStore;

/// One entry of a task's history, as the store recorded it (see
/// [`TaskStore::history`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TaskEvent {
    /// Its place in the task's history, from 1 (the oldest may have been
    /// dropped: at most 500 are kept per task).
    pub seq: u64,
    /// When, on the database's clock.
    pub at: Millis,
    /// What happened: `created`, `claimed`, `taken_over` (a lease that ran
    /// out), `step_ended` (and working on), `step_failed` (to be retried),
    /// `question_asked`, `answered`,
    /// `cancel_requested`, `released`, `completed`, `failed` or
    /// `cancelled`.
    pub kind: String,
    /// The instance that held the lease: the one claiming, or the one whose
    /// step ended or whose lease was released.
    pub worker: Option<String>,
    /// The task's status after the change.
    pub status: TaskPhase,
    /// The task's status message after the change, its first 1 000
    /// characters (`from W` for a takeover: the instance whose lease ran
    /// out).
    pub message: Option<String>,
}

/// A `task_events` row as both stores read it: seq, at, kind, worker,
/// status, message.
type EventRow = (i64, i64, String, Option<String>, String, Option<String>);

/// Reads the `task_events` rows of one task.
fn decode_events(id: &TaskId, rows: Vec<EventRow>) -> StoreResult<Vec<TaskEvent>> {
    rows.into_iter()
        .map(|(seq, at, kind, worker, status, message)| {
            Ok(TaskEvent {
                seq: u64::try_from(seq).unwrap_or(0),
                at: Millis::from_unix_ms(at),
                kind,
                worker,
                status: TaskPhase::parse(&status).ok_or_else(|| StoreError::Corrupt {
                    task: id.to_string(),
                    reason: format!("history status {status}"),
                })?,
                message,
            })
        })
        .collect()
}

/// Errors a store can return.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The task does not exist, belongs to someone else, or has expired.
    #[error("unknown or expired task id")]
    NotFound,
    /// The caller's lease was taken over: its write was refused.
    #[error("lease lost: task {task} is now held by another worker or attempt")]
    LeaseLost { task: TaskId },
    /// A store URL that cannot be used.
    #[error("invalid store URL `{url}`: {reason}")]
    InvalidUrl { url: String, reason: String },
    /// A stored row that does not decode (written by an incompatible version?).
    #[error("corrupt task row {task}: {reason}")]
    Corrupt { task: String, reason: String },
    /// The database cannot take this request now (the disk is full, it is
    /// read-only, it cannot be reached, no connection was free in time).
    /// Nothing is lost by retrying: a write that failed this way was not
    /// acknowledged, and the store recovers by itself once the cause clears.
    #[error("the task store is unavailable ({cause}): {source}")]
    Unavailable {
        cause: Outage,
        #[source]
        source: sqlx::Error,
    },
    #[error("database error: {0}")]
    Database(sqlx::Error),
    #[error("migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// A PostgreSQL server that acknowledges commits before they are on
    /// disk, while the store was opened with [`Durability::Full`].
    #[error(
        "refusing to serve: PostgreSQL setting {setting} = {value}, so a commit can be \
         acknowledged before it is on disk and a crash of the server loses acknowledged tasks; \
         set {setting} = {wanted} (ALTER SYSTEM, the database or the role), or accept that \
         window explicitly with store durability \"relaxed\""
    )]
    NotDurable {
        setting: &'static str,
        value: String,
        wanted: &'static str,
    },
    #[error("could not create the store file {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// A SQLite store's directory does not exist. Not created: a mistyped
    /// path would otherwise give a new, empty store, and the tasks of the
    /// real one would seem to have vanished.
    #[error(
        "the store's directory {path} does not exist: check the store path for a typo, or \
         create the directory (mkdir -p {path}) if a new store belongs there"
    )]
    MissingDirectory { path: String },
}

pub type StoreResult<T> = Result<T, StoreError>;

/// When a write is acknowledged: once it is on disk, or once the database
/// has it (and the disk will, soon).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Durability {
    /// An acknowledged write survives a power cut: SQLite runs
    /// `synchronous = FULL` (the WAL is synced at every commit, once per
    /// group-committed batch); a PostgreSQL server with `fsync` or
    /// `synchronous_commit` off is refused at start.
    #[default]
    Full,
    /// An acknowledged write survives a crash of the process, not of the
    /// machine: SQLite runs `synchronous = NORMAL` (the WAL is synced at
    /// its checkpoints only), and PostgreSQL is served whatever its
    /// settings. For operators who accept losing the last acknowledged
    /// writes to a power cut.
    Relaxed,
}

impl std::str::FromStr for Durability {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "full" => Ok(Durability::Full),
            "relaxed" => Ok(Durability::Relaxed),
            _ => Err(format!(
                "store durability must be \"full\" or \"relaxed\", not {s:?}"
            )),
        }
    }
}

/// Why a store is [`StoreError::Unavailable`]: what an operator should look
/// at, and what a client is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Outage {
    /// The database's disk (or quota) is full: writes fail, reads work.
    DiskFull,
    /// The database refuses writes (a read-only file, mount or replica).
    ReadOnly,
    /// The database cannot be reached or dropped the connection.
    Unreachable,
    /// No connection became free in time (the pool is exhausted or the
    /// server is too slow to accept one).
    Busy,
}

impl Outage {
    /// A stable name for logs, metrics and the error's `data.reason`.
    pub fn as_str(self) -> &'static str {
        match self {
            Outage::DiskFull => "disk_full",
            Outage::ReadOnly => "read_only",
            Outage::Unreachable => "unreachable",
            Outage::Busy => "busy",
        }
    }
}

impl std::fmt::Display for Outage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Outage::DiskFull => "the database's disk is full",
            Outage::ReadOnly => "the database is read-only",
            Outage::Unreachable => "the database cannot be reached",
            Outage::Busy => "no database connection became free in time",
        })
    }
}

impl StoreError {
    /// The outage behind this error, if it is one: retrying later can work.
    pub fn outage(&self) -> Option<Outage> {
        match self {
            StoreError::Unavailable { cause, .. } => Some(*cause),
            _ => None,
        }
    }
}

impl From<sqlx::Error> for StoreError {
    fn from(source: sqlx::Error) -> Self {
        match outage_of(&source) {
            Some(cause) => StoreError::Unavailable { cause, source },
            None => StoreError::Database(source),
        }
    }
}

/// Classifies a database error as an outage (SQLite result codes and
/// PostgreSQL SQLSTATEs), or `None` for errors a retry would not cure.
fn outage_of(error: &sqlx::Error) -> Option<Outage> {
    match error {
        sqlx::Error::PoolTimedOut => Some(Outage::Busy),
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed
        | sqlx::Error::Protocol(_) => Some(Outage::Unreachable),
        sqlx::Error::Database(db) => {
            let code = db.code()?;
            if db.try_downcast_ref::<sqlx::sqlite::SqliteError>().is_some() {
                // The primary result code is the extended code's low byte.
                let extended = code.parse::<u32>().ok()?;
                return match extended & 0xff {
                    13 => Some(Outage::DiskFull),         // SQLITE_FULL
                    8 => Some(Outage::ReadOnly),          // SQLITE_READONLY
                    10 | 14 => Some(Outage::Unreachable), // SQLITE_IOERR, SQLITE_CANTOPEN
                    5 | 6 => Some(Outage::Busy),          // SQLITE_BUSY, SQLITE_LOCKED
                    _ => None,
                };
            }
            // PostgreSQL SQLSTATEs.
            match &*code {
                "53100" => Some(Outage::DiskFull),
                "25006" => Some(Outage::ReadOnly),
                "53000" | "53200" | "53300" | "57P03" | "55P03" => Some(Outage::Busy),
                c if c.starts_with("08") || c.starts_with("57P") => Some(Outage::Unreachable),
                _ => None,
            }
        }
        _ => None,
    }
}

/// What `record_input` did with the answers it was given.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct InputAck {
    /// Keys that were outstanding and are now answered.
    pub accepted: Vec<String>,
    /// True when no outstanding request is left, so the job can resume.
    pub complete: bool,
}

/// What a sweep did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SweepReport {
    pub expired: u64,
    pub deleted: u64,
}

/// What one owner's stored tasks take up ([`TaskStore::stored_usage`]), for
/// the per-principal storage quota.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StoredUsage {
    /// Stored tasks, live and ended, up to the bound the count was given.
    pub tasks: u64,
    /// Bytes of JSON and text those tasks' rows hold: arguments, status
    /// message, state, input requests and answers, result, error.
    pub bytes: u64,
}

/// A task handed out by [`TaskStore::claim`]. It reads as the task itself
/// (`Deref`), with what the claim learned about the lease it replaced.
#[derive(Debug, Clone, PartialEq)]
pub struct Claimed {
    pub task: TaskRecord,
    /// The worker whose lease had run out when this claim took the task
    /// (it died or stalled past its lease); `None` when nobody held it.
    pub taken_over_from: Option<String>,
}

impl std::ops::Deref for Claimed {
    type Target = TaskRecord;

    fn deref(&self) -> &TaskRecord {
        &self.task
    }
}

/// Where a page of [`TaskStore::list`] ends: the last task it held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListCursor {
    pub created_at: Millis,
    pub id: TaskId,
}

/// How many stored tasks one tool has in one status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskCount {
    pub tool: String,
    pub status: TaskPhase,
    pub count: u64,
}

/// A change to a task made through a store, possibly by another instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskChange {
    pub task: TaskId,
    pub kind: ChangeKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeKind {
    /// A step was saved, input arrived or the task was nudged.
    Updated,
    /// A cancel was requested: the instance running a step should stop it.
    CancelRequested,
}

/// Durable storage for tasks; see the module docs for the semantics.
#[async_trait]
pub trait TaskStore: Send + Sync + std::fmt::Debug + 'static {
    /// Persists a new `working` task, due at once, and returns it.
    async fn create(&self, task: NewTask) -> StoreResult<TaskRecord>;

    /// Persists a new `working` task already leased to `worker` until
    /// `task.now + lease` (its first [`Fence`]), in the one transaction that
    /// creates it: the process that creates a task runs its first step at
    /// once instead of waiting for its next claim. To everyone else it is a
    /// task being stepped; if `worker` dies, the lease runs out and any
    /// instance claims it, as after any crash.
    async fn create_claimed(
        &self,
        task: NewTask,
        worker: &str,
        lease: Duration,
    ) -> StoreResult<TaskRecord>;

    /// The task, if it exists, belongs to `owner` and has not expired.
    async fn get(&self, owner: &Owner, id: &TaskId, now: Millis)
    -> StoreResult<Option<TaskRecord>>;

    /// Records answers to outstanding input requests.
    async fn record_input(
        &self,
        owner: &Owner,
        id: &TaskId,
        responses: BTreeMap<String, Value>,
        now: Millis,
    ) -> StoreResult<InputAck>;

    /// Asks a live task to cancel. Errors with `NotFound` like `get` would.
    async fn request_cancel(&self, owner: &Owner, id: &TaskId, now: Millis) -> StoreResult<()>;

    /// Leases up to `limit` due tasks to `worker` for `lease`, saying for
    /// each whose expired lease it took over. Due and lease ends are
    /// judged at `now` and, on a shared store, on its own clock too (see
    /// the module docs).
    async fn claim(
        &self,
        worker: &str,
        limit: usize,
        lease: Duration,
        now: Millis,
    ) -> StoreResult<Vec<Claimed>>;

    /// Extends a lease the caller still holds to `lease` after `now` (and
    /// after the shared store's own time; see the module docs).
    async fn heartbeat(
        &self,
        id: &TaskId,
        worker: &str,
        fence: Fence,
        lease: Duration,
        now: Millis,
    ) -> StoreResult<()>;

    /// Saves what a step produced and releases the lease, if the caller still
    /// holds it. Returns the updated record. `LeaseLost` if another worker
    /// or attempt holds the task (or it ended); `NotFound` if the task is
    /// gone altogether (swept), which is no lease problem.
    async fn checkpoint(
        &self,
        id: &TaskId,
        worker: &str,
        fence: Fence,
        outcome: Outcome,
        now: Millis,
    ) -> StoreResult<TaskRecord>;

    /// Gives up a lease the caller still holds, leaving the task as it was
    /// and due at once (a step whose result could not be saved), so another
    /// attempt, here or on another instance, need not wait for the lease to
    /// run out. `LeaseLost` if the caller no longer holds it.
    async fn release(
        &self,
        id: &TaskId,
        worker: &str,
        fence: Fence,
        now: Millis,
    ) -> StoreResult<()>;

    /// Makes a `working` task that waits for its next step due at `now`,
    /// so a watcher that saw its upstream change need not wait for the timer.
    /// Returns whether the task was waiting; a task being stepped, waiting for
    /// input or ended is left alone.
    async fn nudge(&self, id: &TaskId, now: Millis) -> StoreResult<bool>;
    /// Releases every lease `worker` holds (graceful shutdown), making its
    /// tasks due at once for any other worker.
    async fn release_all(&self, worker: &str, now: Millis) -> StoreResult<u64>;

    /// The earliest `due_at` of a live task, to know how long to sleep.
    async fn next_due(&self) -> StoreResult<Option<Millis>>;

    /// How many stored tasks each tool has in each status (ended tasks count
    /// until the sweeper deletes them), for the `/metrics` gauge: one
    /// aggregate query, no row decoded. Pairs with no task are left out.
    async fn count_by_tool_and_status(&self) -> StoreResult<Vec<TaskCount>>;

    /// How many live (`working` or `input_required`) tasks `owner` has that
    /// are not past their TTL, counting no further than `at_most`, for the
    /// per-principal cap on concurrent tasks (so a check costs at most the
    /// cap, however many tasks the owner has). Counted in the store, so the
    /// cap holds across instances.
    async fn count_active(&self, owner: &Owner, now: Millis, at_most: u64) -> StoreResult<u64>;

    /// What `owner`'s stored tasks (live and ended, until the sweeper
    /// deletes them) take up, counting no further than `at_most` tasks, for
    /// the per-principal storage quota: a check costs at most that many
    /// index entries, however many tasks the owner has. Counted in the
    /// store, so the quota holds across instances.
    async fn stored_usage(&self, owner: &Owner, at_most: u64) -> StoreResult<StoredUsage>;

    /// The last update of `owner`'s oldest ended task (the first the sweeper
    /// deletes once it is older than the retention window), or `None` if the
    /// owner has no ended task: how long a principal at its storage quota
    /// waits for room.
    async fn oldest_ended(&self, owner: &Owner) -> StoreResult<Option<Millis>>;

    /// The history of `owner`'s task `id` (migration 0010: the store's own
    /// triggers append an event in the transaction of every change), oldest
    /// first; `None` for a task `get` would not show.
    async fn history(
        &self,
        owner: &Owner,
        id: &TaskId,
        now: Millis,
    ) -> StoreResult<Option<Vec<TaskEvent>>>;

    /// `owner`'s tasks that have not expired, newest first (by creation,
    /// then id), at most `limit`, starting after `after` (the last task of
    /// the previous page): `tasks/list`. One index range
    /// (`tasks_owner_created`, migration 0007), so a page costs `limit`
    /// rows however many tasks the owner or anyone else has.
    async fn list(
        &self,
        owner: &Owner,
        now: Millis,
        after: Option<&ListCursor>,
        limit: u32,
    ) -> StoreResult<Vec<TaskRecord>>;

    /// Expires overdue live tasks and deletes old ended ones.
    ///
    /// A live task is overdue when its `expires_at` has passed (no progress
    /// within its TTL) or it was created more than `max_lifetime` ago. It
    /// is not ended here: it is asked to cancel (its status message says
    /// why), so the engine runs its backend's cancel and the upstream work
    /// stops; its handle answers as unknown from now on. An ended task is
    /// deleted `retention` after it ended or expired.
    async fn sweep(
        &self,
        now: Millis,
        retention: Duration,
        max_lifetime: Option<Duration>,
    ) -> StoreResult<SweepReport>;

    /// Changes made by every instance on this store, for stores shared by
    /// several processes (PostgreSQL `LISTEN/NOTIFY`). `None`: only this
    /// process writes, so the engine's own notices are complete.
    fn changes(&self) -> Option<tokio::sync::broadcast::Receiver<TaskChange>> {
        None
    }

    /// The secret stored under `name`, storing `fresh` first if there is
    /// none: the first writer wins and every instance reads the same value.
    /// Callers pass sealed bytes; see [`seal::shared_secret`].
    async fn secret(&self, name: &str, fresh: Vec<u8>) -> StoreResult<Vec<u8>>;

    /// Replaces the secret `name` with `new` if it still holds `old`;
    /// returns whether it did.
    async fn replace_secret(&self, name: &str, old: &[u8], new: Vec<u8>) -> StoreResult<bool>;

    /// Binds the upstream id `id` of kind `namespace` (a Q Business
    /// conversation, an A2A context) to `owner` unless it is bound already,
    /// and returns the principal it is bound to: the first principal to
    /// bind an id owns it for good, on every instance.
    async fn bind_upstream_id(
        &self,
        namespace: &str,
        id: &str,
        owner: &Owner,
        now: Millis,
    ) -> StoreResult<Owner>;

    /// The principal the upstream id is bound to, if any.
    async fn upstream_id_owner(&self, namespace: &str, id: &str) -> StoreResult<Option<Owner>>;
}

/// The end of a fenced write (`heartbeat`, `release`): it changed the task's
/// one row, or the caller no longer holds the lease it was fenced by.
fn fenced(rows_affected: u64, task: &TaskId) -> StoreResult<()> {
    if rows_affected == 1 {
        Ok(())
    } else {
        Err(StoreError::LeaseLost { task: task.clone() })
    }
}

/// A `(tool, status, count)` row of `count_by_tool_and_status`.
fn task_count((tool, status, count): (String, String, i64)) -> StoreResult<TaskCount> {
    Ok(TaskCount {
        status: TaskPhase::parse(&status).ok_or_else(|| StoreError::Corrupt {
            task: format!("(a {tool} task)"),
            reason: format!("status {status}"),
        })?,
        tool,
        count: u64::try_from(count).unwrap_or(0),
    })
}

/// Opens the store a URL names: `sqlite://PATH` (created on first use),
/// `sqlite::memory:`, or `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE`
/// (also `postgresql://`; pool settings such as `?max_connections=20` are
/// described in [`PostgresStore`]'s module docs). Errors show the URL with
/// its password redacted.
pub async fn open(url: &str) -> StoreResult<std::sync::Arc<dyn TaskStore>> {
    open_with(url, Durability::Full).await
}

/// [`open`] with a [`Durability`] other than the default.
pub async fn open_with(
    url: &str,
    durability: Durability,
) -> StoreResult<std::sync::Arc<dyn TaskStore>> {
    if url.starts_with("sqlite:") {
        Ok(std::sync::Arc::new(
            SqliteStore::open_with(url, durability).await?,
        ))
    } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        Ok(std::sync::Arc::new(
            PostgresStore::open_with(url, durability).await?,
        ))
    } else {
        Err(StoreError::InvalidUrl {
            url: redact_url(url),
            reason: "expected sqlite://PATH (for example sqlite:///var/lib/agentgate/tasks.db) \
                     or postgres://USER@HOST/DATABASE"
                .into(),
        })
    }
}

/// One schema migration of a store, and whether the store has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigrationState {
    /// Its version (the number its file name starts with).
    pub version: i64,
    /// What it does, from its file name.
    pub description: String,
    /// Whether the store has applied it.
    pub applied: bool,
}

impl MigrationState {
    fn list(migrator: &sqlx::migrate::Migrator, applied: &[i64]) -> Vec<Self> {
        migrator
            .iter()
            .filter(|m| m.migration_type.is_up_migration())
            .map(|m| Self {
                version: m.version,
                description: m.description.to_string(),
                applied: applied.contains(&m.version),
            })
            .collect()
    }
}

/// Which schema migrations the store a URL names has (see [`open`] for the
/// URLs), without applying any or creating a SQLite file: what `agentgate
/// migrate --status` shows before a roll-out.
pub async fn migration_status(url: &str) -> StoreResult<Vec<MigrationState>> {
    if url.starts_with("sqlite:") {
        SqliteStore::migration_status(url).await
    } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        PostgresStore::migration_status(url).await
    } else {
        Err(StoreError::InvalidUrl {
            url: redact_url(url),
            reason: "expected sqlite://PATH or postgres://USER@HOST/DATABASE".into(),
        })
    }
}

/// A URL with any password replaced, fit for logs and errors: the one in the
/// user info (`user:***@host`) and a `password=` query parameter.
pub fn redact_url(url: &str) -> String {
    let redacted = match (url.find("://"), url.rfind('@')) {
        (Some(scheme_end), Some(at)) if at > scheme_end => {
            let userinfo = &url[scheme_end + 3..at];
            match userinfo.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &url[..scheme_end + 3], &url[at..]),
                None => url.to_owned(),
            }
        }
        _ => url.to_owned(),
    };
    // `password=` parameters, wherever the query starts (a password may hold
    // `?` or `@`, so the URL is not split on them).
    const KEY: &str = "password=";
    let lower = redacted.to_ascii_lowercase();
    let mut shown = String::with_capacity(redacted.len());
    let mut copied = 0;
    for (at, _) in lower.match_indices(KEY) {
        let after_separator = at > 0 && matches!(redacted.as_bytes()[at - 1], b'?' | b'&');
        if after_separator && at >= copied {
            let value = at + KEY.len();
            let end = redacted[value..]
                .find('&')
                .map_or(redacted.len(), |e| value + e);
            shown.push_str(&redacted[copied..value]);
            shown.push_str("***");
            copied = end;
        }
    }
    shown.push_str(&redacted[copied..]);
    shown
}

#[cfg(test)]
mod tests {
    #[test]
    fn redact_url_hides_passwords_only() {
        assert_eq!(
            super::redact_url("postgres://app:s3cret@db:5432/x"),
            "postgres://app:***@db:5432/x"
        );
        assert_eq!(
            super::redact_url("sqlite:///tmp/a.db"),
            "sqlite:///tmp/a.db"
        );
        assert_eq!(
            super::redact_url(
                "postgres://app@db/x?sslmode=require&password=s3cret&max_connections=4"
            ),
            "postgres://app@db/x?sslmode=require&password=***&max_connections=4"
        );
        assert_eq!(
            super::redact_url("postgresql://app:p@ss?w/rd@db/x?PASSWORD=s3cret"),
            "postgresql://app:***@db/x?PASSWORD=***"
        );
        assert_eq!(
            super::redact_url("postgres://db/x?password=s3cret&user=a@b&Password=again"),
            "postgres://db/x?password=***&user=a@b&Password=***"
        );
    }
}
