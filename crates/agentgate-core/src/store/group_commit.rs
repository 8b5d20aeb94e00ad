//! Group commit: the writes of steps and creates, batched into shared
//! transactions, for both stores.
//!
//! ```text
//! create() / checkpoint() ─▶ queue ─▶ writer task: every write queued by then, in one transaction:
//!      ▲                              INSERT the new tasks; read the checkpointed rows ─▶ decide
//!      │                              (lease, fence, transition) ─▶ write them back
//!      └──── its own answer ◀──────── (PostgreSQL: one NOTIFY naming the saved tasks) ─▶ COMMIT
//! ```
//!
//! A commit costs the same for one row as for a hundred: on PostgreSQL it
//! waits for a WAL flush, and a transaction that `NOTIFY`s takes a
//! database-wide lock for its commit, so notifying commits run one at a time;
//! on SQLite every write transaction takes the one write lock. With one
//! transaction per write, the scheduler could save no more steps a second
//! than commits happen, and a step's save queued behind every create. Here
//! one writer per store (a few on PostgreSQL, whose transactions run side
//! by side) saves every write that queued up while its last batch
//! committed; under low load a batch is one write and costs what it did
//! before. SQLite queues creates and checkpoints; PostgreSQL queues
//! checkpoints only (its creates commit from many connections at once, and
//! the server shares WAL flushes among them by itself). Answers and the
//! rest of the store's writes (input, cancels, claims, sweeps) keep their
//! own transactions.
//!
//! Each caller still gets its own answer: `LeaseLost` and `NotFound` are
//! decided per row, in queue order, so a second checkpoint of the same task
//! in one batch finds the lease the first one released. A database error
//! aborts the transaction, so nothing of the batch was saved: an outage is
//! every caller's error (each retries); any other error (a duplicate id, a
//! value the database refuses) has each write tried alone, so one bad write
//! cannot fail the others. A write is acknowledged only after its batch
//! committed.

use std::collections::HashMap;
use std::sync::Arc;

use agentgate_backend::{Millis, TaskId};
use async_trait::async_trait;
use tokio::sync::{mpsc, oneshot};

use super::{Outage, StoreError, StoreResult};
use crate::task::{Fence, NewTask, Outcome, TaskRecord};

/// The most writes saved in one transaction.
const MAX_BATCH: usize = 256;

/// One write of a batch.
#[derive(Debug)]
pub(super) enum Write {
    /// [`TaskStore::create`](super::TaskStore::create) (no lease) or
    /// [`TaskStore::create_claimed`](super::TaskStore::create_claimed)
    /// (leased to a worker until a time).
    Insert {
        task: NewTask,
        lease: Option<(String, Millis)>,
    },
    Checkpoint(Checkpoint),
}

impl Write {
    pub(super) fn as_insert(&self) -> Option<(&NewTask, Option<(&str, Millis)>)> {
        match self {
            Write::Insert { task, lease } => Some((
                task,
                lease
                    .as_ref()
                    .map(|(worker, until)| (worker.as_str(), *until)),
            )),
            Write::Checkpoint(_) => None,
        }
    }

    pub(super) fn as_checkpoint(&self) -> Option<&Checkpoint> {
        match self {
            Write::Checkpoint(checkpoint) => Some(checkpoint),
            Write::Insert { .. } => None,
        }
    }
}

/// One step's outcome to save, as [`TaskStore::checkpoint`](super::TaskStore::checkpoint)
/// received it.
#[derive(Debug)]
pub(super) struct Checkpoint {
    pub(super) id: TaskId,
    pub(super) worker: String,
    pub(super) fence: Fence,
    pub(super) outcome: Outcome,
    pub(super) now: Millis,
}

/// What a store does with one batch, in one transaction: insert the new
/// tasks, read the checkpointed rows, [`decide`], write
/// [`Decided::writes`], commit. The outer `Err` means nothing was saved; the
/// inner results are per write, in batch order ([`in_batch_order`]).
#[async_trait]
pub(super) trait SaveBatch: Send + Sync + 'static {
    async fn save(&self, batch: &[Write]) -> StoreResult<Vec<StoreResult<TaskRecord>>>;
}

#[derive(Debug)]
struct Queued {
    write: Write,
    answer: oneshot::Sender<StoreResult<TaskRecord>>,
}

/// The queue in front of a store's writer. The writer task ends when the
/// last clone of this queue (of the store) is dropped.
#[derive(Debug, Clone)]
pub(super) struct WriteQueue {
    queue: mpsc::UnboundedSender<Queued>,
}

impl WriteQueue {
    /// Starts `writers` writer tasks sharing one queue and `saver`: one for
    /// a database with one writer (SQLite); several where transactions run
    /// side by side (PostgreSQL), so a batch waiting for its commit's flush
    /// does not hold up the next one.
    pub(super) fn start(saver: impl SaveBatch, writers: usize) -> Self {
        let (queue, queued) = mpsc::unbounded_channel();
        let saver = Arc::new(saver);
        let queued = Arc::new(tokio::sync::Mutex::new(queued));
        for _ in 0..writers.max(1) {
            tokio::spawn(write_loop(saver.clone(), queued.clone()));
        }
        Self { queue }
    }

    /// Inserts a new task with the next batch (leased to `lease`'s worker
    /// until its time, if given).
    pub(super) async fn insert(
        &self,
        task: NewTask,
        lease: Option<(&str, Millis)>,
    ) -> StoreResult<TaskRecord> {
        let lease = lease.map(|(worker, until)| (worker.to_owned(), until));
        self.send(Write::Insert { task, lease }).await
    }

    /// Saves a step's outcome with the next batch.
    pub(super) async fn checkpoint(
        &self,
        id: &TaskId,
        worker: &str,
        fence: Fence,
        outcome: Outcome,
        now: Millis,
    ) -> StoreResult<TaskRecord> {
        self.send(Write::Checkpoint(Checkpoint {
            id: id.clone(),
            worker: worker.to_owned(),
            fence,
            outcome,
            now,
        }))
        .await
    }

    async fn send(&self, write: Write) -> StoreResult<TaskRecord> {
        let (answer, answered) = oneshot::channel();
        self.queue
            .send(Queued { write, answer })
            .map_err(|_| writer_gone())?;
        answered.await.map_err(|_| writer_gone())?
    }
}

/// The writer stopped (its runtime is shutting down): nothing was saved.
fn writer_gone() -> StoreError {
    StoreError::Unavailable {
        cause: Outage::Unreachable,
        source: sqlx::Error::WorkerCrashed,
    }
}

/// One writer: takes whatever is queued (waiting for the queue while
/// another writer holds it), saves it, and goes back for more.
async fn write_loop(
    saver: Arc<impl SaveBatch>,
    queued: Arc<tokio::sync::Mutex<mpsc::UnboundedReceiver<Queued>>>,
) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    loop {
        let taken = queued.lock().await.recv_many(&mut batch, MAX_BATCH).await;
        if taken == 0 {
            return;
        }
        write(&*saver, std::mem::take(&mut batch)).await;
    }
}

/// Saves `batch` and answers every caller (a caller that stopped waiting
/// needs no answer, so failed sends are ignored).
async fn write(saver: &impl SaveBatch, batch: Vec<Queued>) {
    let (writes, answers): (Vec<Write>, Vec<_>) = batch
        .into_iter()
        .map(|queued| (queued.write, queued.answer))
        .unzip();
    match saver.save(&writes).await {
        Ok(results) => {
            for (answer, result) in answers.into_iter().zip(results) {
                let _ = answer.send(result);
            }
        }
        Err(e) if writes.len() > 1 && e.outage().is_none() => {
            tracing::debug!(error = %e, size = writes.len(), "a write batch failed; saving each alone");
            for (write, answer) in writes.iter().zip(answers) {
                let result = match saver.save(std::slice::from_ref(write)).await {
                    Ok(mut results) => results.pop().unwrap_or_else(|| Err(writer_gone())),
                    Err(e) => Err(e),
                };
                let _ = answer.send(result);
            }
        }
        Err(e) => {
            for answer in answers {
                let _ = answer.send(Err(copy_error(&e)));
            }
        }
    }
}

/// The same failure for every caller of a failed batch (`sqlx::Error` is
/// not `Clone`): an outage stays an outage of the same cause.
fn copy_error(error: &StoreError) -> StoreError {
    let source = sqlx::Error::Io(std::io::Error::other(error.to_string()));
    match error.outage() {
        Some(cause) => StoreError::Unavailable { cause, source },
        None => StoreError::Database(source),
    }
}

/// The checkpoints' answers and the rows to write back.
#[derive(Debug, Default)]
pub(super) struct Decided {
    /// Per checkpoint, in batch order.
    pub(super) results: Vec<StoreResult<TaskRecord>>,
    /// The new state of every task saved (lease released; `fence` is the
    /// one the write must still find), in batch order.
    pub(super) writes: Vec<TaskRecord>,
}

/// Checks each checkpoint against the task as the transaction read it
/// (`rows`, by id; a missing id was deleted) and applies its outcome, in
/// batch order.
pub(super) fn decide(
    batch: &[&Checkpoint],
    mut rows: HashMap<String, StoreResult<TaskRecord>>,
) -> Decided {
    let mut results = Vec::with_capacity(batch.len());
    let mut writes = Vec::new();
    for one in batch {
        let result = match rows.get_mut(one.id.as_str()) {
            // Gone (swept after it expired): nobody holds it, nothing to save.
            None => Err(StoreError::NotFound),
            Some(Err(e)) => Err(StoreError::Corrupt {
                task: one.id.to_string(),
                reason: e.to_string(),
            }),
            Some(Ok(task))
                if task.lease_owner.as_deref() == Some(one.worker.as_str())
                    && task.fence == one.fence
                    && !task.status.is_terminal() =>
            {
                super::transition::apply(task, one.outcome.clone(), one.now);
                task.lease_owner = None;
                task.lease_until = None;
                writes.push(task.clone());
                Ok(task.clone())
            }
            Some(Ok(_)) => Err(StoreError::LeaseLost {
                task: one.id.clone(),
            }),
        };
        results.push(result);
    }
    Decided { results, writes }
}

/// Every write's answer in batch order, from the inserts' answers and the
/// checkpoints' (each in its own batch order).
pub(super) fn in_batch_order(
    batch: &[Write],
    inserted: Vec<StoreResult<TaskRecord>>,
    decided: Vec<StoreResult<TaskRecord>>,
) -> Vec<StoreResult<TaskRecord>> {
    let (mut inserted, mut decided) = (inserted.into_iter(), decided.into_iter());
    batch
        .iter()
        .map(|write| {
            let next = match write {
                Write::Insert { .. } => inserted.next(),
                Write::Checkpoint(_) => decided.next(),
            };
            next.unwrap_or_else(|| Err(writer_gone()))
        })
        .collect()
}
