//! [`Tasks`], the task service: the one door through which a task is
//! created, read, answered, cancelled and watched. The engine's plumbing
//! (its store, wake-ups, change announcements, interrupts) is crate-private;
//! everything outside the crate changes a task through here.
//!
//! ```text
//! caller (MCP gateway, task tools, a sync view, a test)
//!   create(owner, spec, args, quota) ─▶ count live (cap) ─▶ count stored (quota)
//!                                     ─▶ store.create ─▶ wake
//!   get(owner, id)                    ─▶ store.get
//!   answer(owner, id, responses)      ─▶ store.record_input ─▶ publish (+ wake once complete)
//!   cancel(owner, id)                 ─▶ store.request_cancel ─▶ interrupt, publish, wake
//!   watch(owner, ids)                 ─▶ subscribe, then read: TaskWatch::changed
//! ```
//!
//! Each operation does its store write *and* tells everyone who must know
//! (the step running the task here, local waiters, the scheduler) in one
//! place, so callers translate and never coordinate. Every operation is
//! scoped to the caller's owner: another owner's task is an unknown one.

use std::sync::Arc;
use std::time::Duration;

use agentgate_backend::{Millis, Owner, TaskId, ToolSpec};
use serde_json::{Map, Value};
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::{broadcast, mpsc};

use super::Engine;
use crate::registry::ToolRegistry;
use crate::store::{InputAck, StoreError, StoredUsage};
use crate::task::{NewTask, TaskRecord};

/// Why a task operation was refused. `#[non_exhaustive]`: more refusals may
/// come; the MCP side maps each to its JSON-RPC error in one place.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TaskError {
    /// No such task for this owner: never created, expired, or another
    /// owner's.
    #[error("unknown or expired task id")]
    UnknownTask,
    /// The owner already has `limit` live tasks.
    #[error("too many live tasks: {active} working or input_required, the limit is {limit}")]
    TooManyTasks { limit: u64, active: u64 },
    /// The owner's stored tasks (live and ended, until the sweeper deletes
    /// them) are at a storage quota: `seen` of `limit`. Room comes back
    /// when the sweeper deletes ended tasks, in about `retry_after`.
    #[error("storage quota reached: {seen} {what} stored, the limit is {limit}")]
    StorageFull {
        what: StorageQuota,
        limit: u64,
        seen: u64,
        retry_after: Duration,
    },
    /// The store failed: an outage or worse. Never reported as an unknown
    /// task, so a client can tell "try again" from "does not exist".
    #[error("task store: {0}")]
    Store(#[source] StoreError),
}

impl From<StoreError> for TaskError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound => TaskError::UnknownTask,
            other => TaskError::Store(other),
        }
    }
}

/// Which storage quota a [`TaskError::StorageFull`] refusal hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StorageQuota {
    /// `max_stored_tasks`: how many tasks an owner keeps stored.
    Tasks,
    /// `max_stored_bytes`: how many bytes its stored tasks hold.
    Bytes,
}

impl std::fmt::Display for StorageQuota {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            StorageQuota::Tasks => "tasks",
            StorageQuota::Bytes => "bytes",
        })
    }
}

/// Caps a transport puts on the tasks its callers create (from its
/// `[limits]`); the default caps nothing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TaskQuota {
    /// Live (working or input_required) tasks one owner may have; 0 = no cap.
    pub max_live: u64,
    /// Longest TTL a task gets, whatever its tool asks; `None` = no cap.
    pub max_ttl: Option<Duration>,
    /// Tasks one owner may keep stored, live and ended (until the sweeper
    /// deletes them); 0 = no quota.
    pub max_stored_tasks: u64,
    /// Bytes of JSON one owner's stored tasks may hold (arguments, state,
    /// input, results, errors); 0 = no quota.
    pub max_stored_bytes: u64,
}

impl TaskQuota {
    /// Whether a create must read the owner's storage use first.
    fn limits_storage(&self) -> bool {
        self.max_stored_tasks > 0 || self.max_stored_bytes > 0
    }

    /// The quota `usage` is at or over, with its limit and what was seen.
    fn exceeded_by(&self, usage: StoredUsage) -> Option<(StorageQuota, u64, u64)> {
        if self.max_stored_tasks > 0 && usage.tasks >= self.max_stored_tasks {
            Some((StorageQuota::Tasks, self.max_stored_tasks, usage.tasks))
        } else if self.max_stored_bytes > 0 && usage.bytes >= self.max_stored_bytes {
            Some((StorageQuota::Bytes, self.max_stored_bytes, usage.bytes))
        } else {
            None
        }
    }

    /// The TTL a task of a tool with `tool_ttl` gets under this quota.
    pub fn ttl(&self, tool_ttl: Option<Duration>) -> Option<Duration> {
        match (tool_ttl, self.max_ttl) {
            (Some(ttl), Some(max)) => Some(ttl.min(max)),
            (None, max) => max,
            (ttl, None) => ttl,
        }
    }
}

/// Locks that make "count live tasks, then create one" exact per owner on
/// this instance. Striped: owners share a few locks instead of each holding
/// one forever.
const ADMISSION_STRIPES: usize = 64;

/// The task service of one engine: cheap to clone, every clone the same
/// engine. Got from [`Runtime::tasks`](crate::runtime::Runtime::tasks).
#[derive(Debug, Clone)]
pub struct Tasks {
    engine: Engine,
}

impl Tasks {
    pub(crate) fn new(engine: Engine) -> Self {
        Self { engine }
    }

    /// The engine behind the service, for the crate's own plumbing
    /// (metrics, the MRTR key, change subscriptions).
    pub(crate) fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The tools the engine runs now (see [`Engine::replace_tools`]).
    pub fn tools(&self) -> Arc<ToolRegistry> {
        self.engine.tools()
    }

    /// The engine clock's time.
    pub fn now(&self) -> Millis {
        self.engine.now()
    }

    /// Creates a task of `spec`'s tool for `owner` and wakes the scheduler.
    /// The row is committed before this returns, so the id resolves at once
    /// on every instance.
    pub async fn create(
        &self,
        owner: Owner,
        spec: &ToolSpec,
        args: Map<String, Value>,
        quota: &TaskQuota,
    ) -> Result<TaskRecord, TaskError> {
        let now = self.now();
        // Counted and created under one lock per owner: exact on this
        // instance (across instances, a race can overshoot by the number of
        // instances racing).
        // With every cap off (the bench), no lock is taken and no query
        // is made.
        let _admission = if quota.max_live > 0 || quota.limits_storage() {
            let guard = self.admission(&owner).await;
            if quota.max_live > 0 {
                let active = self
                    .engine
                    .store()
                    .count_active(&owner, now, quota.max_live)
                    .await?;
                if active >= quota.max_live {
                    return Err(TaskError::TooManyTasks {
                        limit: quota.max_live,
                        active,
                    });
                }
            }
            if quota.limits_storage() {
                self.check_storage(&owner, quota, now).await?;
            }
            Some(guard)
        } else {
            None
        };
        let ttl = quota.ttl(spec.policy.ttl);
        let task = NewTask {
            id: TaskId::generate(),
            owner,
            tool: spec.tool.name.to_string(),
            args: Value::Object(args),
            status_message: Some("queued".to_owned()),
            ttl_ms: ttl.map(|t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX)),
            now,
        };
        // With a step slot free here, the task is created leased to this
        // process and its first step starts at once; otherwise it is queued
        // for the next claim, here or on another instance.
        let Some((handoff, slot)) = self.engine.handoff() else {
            let record = self.engine.store().create(task).await?;
            tracing::info!(task = %record.id, tool = %spec.tool.name, "task created");
            self.engine.wake();
            return Ok(record);
        };
        let config = &self.engine.config();
        let record = self
            .engine
            .store()
            .create_claimed(task, &config.worker_id, config.lease)
            .await?;
        tracing::info!(task = %record.id, tool = %spec.tool.name, "task created; first step starting");
        if let Err(mpsc::error::SendError((unstarted, _slot))) =
            handoff.send((record.clone(), slot))
        {
            // The scheduler stopped meanwhile: give the lease up so another
            // instance (or this one, restarted) need not wait for it.
            self.engine.release(&unstarted).await;
        }
        Ok(record)
    }

    /// Refuses a create while `owner` is at a storage quota. One bounded
    /// read: at most `max_stored_tasks` index entries (all of the owner's
    /// when only the bytes quota is on).
    async fn check_storage(
        &self,
        owner: &Owner,
        quota: &TaskQuota,
        now: Millis,
    ) -> Result<(), TaskError> {
        let at_most = match quota.max_stored_tasks {
            0 => u64::MAX,
            cap => cap,
        };
        let usage = self.engine.store().stored_usage(owner, at_most).await?;
        let Some((what, limit, seen)) = quota.exceeded_by(usage) else {
            return Ok(());
        };
        Err(TaskError::StorageFull {
            what,
            limit,
            seen,
            retry_after: self.storage_freed_in(owner, now).await,
        })
    }

    /// About when the sweeper frees room for `owner`: once its oldest ended
    /// task is past the retention window, at the sweep after that. With no
    /// ended task (all live), a full retention window from now is the
    /// earliest a task ended now would go.
    async fn storage_freed_in(&self, owner: &Owner, now: Millis) -> Duration {
        let config = &self.engine.config();
        let oldest = match self.engine.store().oldest_ended(owner).await {
            Ok(oldest) => oldest,
            Err(e) => {
                // Only the hint is lost: the refusal stands without it.
                tracing::warn!(error = %e, "could not read the oldest ended task");
                None
            }
        };
        let swept = oldest.unwrap_or(now).saturating_add(config.retention);
        swept
            .since(now)
            .saturating_add(config.sweep_every)
            .max(Duration::from_secs(1))
    }

    /// `owner`'s tasks that have not expired, newest first, at most `limit`,
    /// after `after` (the last task of the previous page): `tasks/list`.
    pub async fn list(
        &self,
        owner: &Owner,
        after: Option<&crate::store::ListCursor>,
        limit: u32,
    ) -> Result<Vec<TaskRecord>, TaskError> {
        Ok(self
            .engine
            .store()
            .list(owner, self.now(), after, limit)
            .await?)
    }

    /// `owner`'s task as it is now.
    pub async fn get(&self, owner: &Owner, id: &TaskId) -> Result<TaskRecord, TaskError> {
        self.engine
            .store()
            .get(owner, id, self.now())
            .await?
            .ok_or(TaskError::UnknownTask)
    }

    /// `owner`'s task's history, oldest first: every change the store
    /// recorded with it (see [`TaskStore::history`](crate::store::TaskStore::history)).
    pub async fn history(
        &self,
        owner: &Owner,
        id: &TaskId,
    ) -> Result<Vec<crate::store::TaskEvent>, TaskError> {
        self.engine
            .store()
            .history(owner, id, self.now())
            .await?
            .ok_or(TaskError::UnknownTask)
    }

    /// Records answers to a task's outstanding input requests; once none is
    /// left the task is due and the scheduler is woken. Answers to requests
    /// already answered are ignored (`accepted` says which counted).
    pub async fn answer(
        &self,
        owner: &Owner,
        id: &TaskId,
        responses: rmcp::model::InputResponses,
    ) -> Result<InputAck, TaskError> {
        let ack = self
            .engine
            .store()
            .record_input(owner, id, responses, self.now())
            .await?;
        if !ack.accepted.is_empty() {
            self.engine.publish(id);
            if ack.complete {
                self.engine.wake();
            }
        }
        Ok(ack)
    }

    /// Asks `owner`'s task to cancel and tells everyone who must know: the
    /// step running it here (interrupted), local waiters, the scheduler
    /// (which runs the job's cancel step). Cancelling an ended task changes
    /// nothing.
    pub async fn cancel(&self, owner: &Owner, id: &TaskId) -> Result<(), TaskError> {
        self.engine
            .store()
            .request_cancel(owner, id, self.now())
            .await?;
        self.engine.interrupt(id);
        self.engine.publish(id);
        self.engine.wake();
        Ok(())
    }

    /// Watches `owner`'s tasks `ids`. Subscribes before the caller's first
    /// read, so no change slips in between.
    pub fn watch(&self, owner: &Owner, ids: Vec<TaskId>) -> TaskWatch {
        TaskWatch {
            tasks: self.clone(),
            owner: owner.clone(),
            changes: self.engine.subscribe(),
            ids,
        }
    }

    async fn admission(&self, owner: &Owner) -> tokio::sync::MutexGuard<'_, ()> {
        use std::hash::{Hash as _, Hasher as _};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        owner.as_str().hash(&mut hasher);
        let stripe = usize::try_from(hasher.finish() % ADMISSION_STRIPES as u64).unwrap_or(0);
        self.engine.inner.admissions[stripe].lock().await
    }
}

pub(super) fn admission_stripes() -> Vec<tokio::sync::Mutex<()>> {
    (0..ADMISSION_STRIPES)
        .map(|_| tokio::sync::Mutex::new(()))
        .collect()
}

/// Some of an owner's tasks, watched for changes (see [`Tasks::watch`]).
#[derive(Debug)]
pub struct TaskWatch {
    tasks: Tasks,
    owner: Owner,
    ids: Vec<TaskId>,
    changes: broadcast::Receiver<TaskId>,
}

/// Which watched tasks may have changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Changed {
    /// This one changed in this process.
    Task(TaskId),
    /// Any of them may have: changes were missed, or the wait ran out (the
    /// task may run on another instance, whose changes this process does not
    /// always hear about). Read them all again.
    Any,
}

impl TaskWatch {
    /// The watched tasks.
    pub fn ids(&self) -> &[TaskId] {
        &self.ids
    }

    /// The watched task `id` as it is now.
    pub async fn read(&self, id: &TaskId) -> Result<TaskRecord, TaskError> {
        self.tasks.get(&self.owner, id).await
    }

    /// Waits until a watched task changes in this process, or `recheck`
    /// passes. Changes to other tasks do not end the wait.
    pub async fn changed(&mut self, recheck: Duration) -> Changed {
        tokio::select! {
            changed = self.next_change() => changed,
            () = tokio::time::sleep(recheck) => Changed::Any,
        }
    }

    /// Waits until a watched task changes in this process (on PostgreSQL,
    /// also on another instance: their changes are relayed here).
    pub async fn next_change(&mut self) -> Changed {
        loop {
            match self.changes.recv().await {
                Ok(changed) if self.ids.contains(&changed) => return Changed::Task(changed),
                Ok(_) => {}
                Err(RecvError::Lagged(_)) => return Changed::Any,
                // The engine is gone: nothing will change any more.
                Err(RecvError::Closed) => std::future::pending::<()>().await,
            }
        }
    }
}
