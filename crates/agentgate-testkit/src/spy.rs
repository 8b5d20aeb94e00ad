//! A [`TaskStore`] that forwards every call to another store and counts the
//! calls by method, so a test can see which requests reach the store (e.g.
//! which polls a cache answers) without a hand-written forwarding store; and
//! that fails chosen calls on request ([`StoreSpy::fail_next`]), the way an
//! outage or a corrupt row would, to test what the engine does then.
//!
//! ```
//! # use agentgate_core::store::{SqliteStore, TaskStore as _};
//! # use agentgate_testkit::spy::{StoreSpy, outage};
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let store = StoreSpy::new(SqliteStore::open("sqlite::memory:").await.expect("store"));
//! store.fail_next("next_due", 1, outage);
//! // … run the engine on it …
//! assert!(store.next_due().await.is_err(), "the injected outage");
//! assert!(store.next_due().await.is_ok(), "then the store itself");
//! assert_eq!(store.calls("next_due"), 2);
//! # }
//! ```

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use agentgate_backend::{Millis, Owner, TaskId};
use agentgate_core::store::{
    Claimed, InputAck, ListCursor, StoreError, StoreResult, StoredUsage, SweepReport, TaskChange,
    TaskCount, TaskStore,
};
use agentgate_core::task::{Fence, NewTask, Outcome, TaskRecord};
use async_trait::async_trait;
use serde_json::Value;

/// Makes the error an injected failure returns.
pub type MakeError = Arc<dyn Fn() -> StoreError + Send + Sync>;

/// `inner` with a call counter per [`TaskStore`] method, and failures to
/// inject per method.
pub struct StoreSpy<S> {
    inner: S,
    calls: Mutex<BTreeMap<&'static str, u64>>,
    failures: Mutex<BTreeMap<&'static str, VecDeque<MakeError>>>,
}

impl<S: std::fmt::Debug> std::fmt::Debug for StoreSpy<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreSpy")
            .field("inner", &self.inner)
            .field(
                "calls",
                &*self.calls.lock().unwrap_or_else(PoisonError::into_inner),
            )
            .finish_non_exhaustive()
    }
}

/// An error like a database that does not answer (the engine retries it).
pub fn outage() -> StoreError {
    StoreError::from(sqlx::Error::Io(std::io::Error::other("injected outage")))
}

impl<S: TaskStore> StoreSpy<S> {
    pub fn new(inner: S) -> Self {
        Self {
            inner,
            calls: Mutex::default(),
            failures: Mutex::default(),
        }
    }

    /// Fails the next `times` calls of `method` (a [`TaskStore`] method's
    /// name) with `error()`, after any failures queued for it before;
    /// failed calls are counted, and do not reach the inner store.
    pub fn fail_next(
        &self,
        method: &'static str,
        times: usize,
        error: impl Fn() -> StoreError + Send + Sync + 'static,
    ) {
        let error: MakeError = Arc::new(error);
        let mut failures = self.failures.lock().unwrap_or_else(PoisonError::into_inner);
        let queue = failures.entry(method).or_default();
        queue.extend(std::iter::repeat_n(error, times));
    }

    /// How many times `method` (a [`TaskStore`] method's name) was called.
    pub fn calls(&self, method: &str) -> u64 {
        self.lock().get(method).copied().unwrap_or(0)
    }

    /// Every method called so far, with its count.
    pub fn all_calls(&self) -> BTreeMap<&'static str, u64> {
        self.lock().clone()
    }

    pub fn inner(&self) -> &S {
        &self.inner
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<&'static str, u64>> {
        self.calls.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn count(&self, method: &'static str) {
        *self.lock().entry(method).or_default() += 1;
    }

    /// Counts a call of `method`; `Err` if a failure was queued for it.
    fn enter(&self, method: &'static str) -> StoreResult<()> {
        self.count(method);
        let make = self
            .failures
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_mut(method)
            .and_then(VecDeque::pop_front);
        make.map_or(Ok(()), |make| Err(make()))
    }
}

#[async_trait]
impl<S: TaskStore> TaskStore for StoreSpy<S> {
    async fn create(&self, task: NewTask) -> StoreResult<TaskRecord> {
        self.enter("create")?;
        self.inner.create(task).await
    }
    async fn create_claimed(
        &self,
        task: NewTask,
        worker: &str,
        lease: Duration,
    ) -> StoreResult<TaskRecord> {
        self.enter("create_claimed")?;
        self.inner.create_claimed(task, worker, lease).await
    }
    async fn get(
        &self,
        owner: &Owner,
        id: &TaskId,
        now: Millis,
    ) -> StoreResult<Option<TaskRecord>> {
        self.enter("get")?;
        self.inner.get(owner, id, now).await
    }
    async fn record_input(
        &self,
        owner: &Owner,
        id: &TaskId,
        responses: BTreeMap<String, Value>,
        now: Millis,
    ) -> StoreResult<InputAck> {
        self.enter("record_input")?;
        self.inner.record_input(owner, id, responses, now).await
    }
    async fn request_cancel(&self, owner: &Owner, id: &TaskId, now: Millis) -> StoreResult<()> {
        self.enter("request_cancel")?;
        self.inner.request_cancel(owner, id, now).await
    }
    async fn claim(
        &self,
        worker: &str,
        limit: usize,
        lease: Duration,
        now: Millis,
    ) -> StoreResult<Vec<Claimed>> {
        self.enter("claim")?;
        self.inner.claim(worker, limit, lease, now).await
    }
    async fn heartbeat(
        &self,
        id: &TaskId,
        worker: &str,
        fence: Fence,
        lease: Duration,
        now: Millis,
    ) -> StoreResult<()> {
        self.enter("heartbeat")?;
        self.inner.heartbeat(id, worker, fence, lease, now).await
    }
    async fn checkpoint(
        &self,
        id: &TaskId,
        worker: &str,
        fence: Fence,
        outcome: Outcome,
        now: Millis,
    ) -> StoreResult<TaskRecord> {
        self.enter("checkpoint")?;
        self.inner.checkpoint(id, worker, fence, outcome, now).await
    }
    async fn release(
        &self,
        id: &TaskId,
        worker: &str,
        fence: Fence,
        now: Millis,
    ) -> StoreResult<()> {
        self.enter("release")?;
        self.inner.release(id, worker, fence, now).await
    }
    async fn nudge(&self, id: &TaskId, now: Millis) -> StoreResult<bool> {
        self.enter("nudge")?;
        self.inner.nudge(id, now).await
    }
    async fn release_all(&self, worker: &str, now: Millis) -> StoreResult<u64> {
        self.enter("release_all")?;
        self.inner.release_all(worker, now).await
    }
    async fn next_due(&self) -> StoreResult<Option<Millis>> {
        self.enter("next_due")?;
        self.inner.next_due().await
    }
    async fn count_by_tool_and_status(&self) -> StoreResult<Vec<TaskCount>> {
        self.enter("count_by_tool_and_status")?;
        self.inner.count_by_tool_and_status().await
    }
    async fn count_active(&self, owner: &Owner, now: Millis, at_most: u64) -> StoreResult<u64> {
        self.enter("count_active")?;
        self.inner.count_active(owner, now, at_most).await
    }
    async fn list(
        &self,
        owner: &Owner,
        now: Millis,
        after: Option<&ListCursor>,
        limit: u32,
    ) -> StoreResult<Vec<TaskRecord>> {
        self.enter("list")?;
        self.inner.list(owner, now, after, limit).await
    }
    async fn stored_usage(&self, owner: &Owner, at_most: u64) -> StoreResult<StoredUsage> {
        self.enter("stored_usage")?;
        self.inner.stored_usage(owner, at_most).await
    }
    async fn history(
        &self,
        owner: &Owner,
        id: &TaskId,
        now: Millis,
    ) -> StoreResult<Option<Vec<agentgate_core::store::TaskEvent>>> {
        self.enter("history")?;
        self.inner.history(owner, id, now).await
    }
    async fn oldest_ended(&self, owner: &Owner) -> StoreResult<Option<Millis>> {
        self.enter("oldest_ended")?;
        self.inner.oldest_ended(owner).await
    }
    async fn sweep(
        &self,
        now: Millis,
        retention: Duration,
        max_lifetime: Option<Duration>,
    ) -> StoreResult<SweepReport> {
        self.enter("sweep")?;
        self.inner.sweep(now, retention, max_lifetime).await
    }
    fn changes(&self) -> Option<tokio::sync::broadcast::Receiver<TaskChange>> {
        self.count("changes");
        self.inner.changes()
    }
    async fn secret(&self, name: &str, fresh: Vec<u8>) -> StoreResult<Vec<u8>> {
        self.enter("secret")?;
        self.inner.secret(name, fresh).await
    }
    async fn replace_secret(&self, name: &str, old: &[u8], new: Vec<u8>) -> StoreResult<bool> {
        self.enter("replace_secret")?;
        self.inner.replace_secret(name, old, new).await
    }
    async fn bind_upstream_id(
        &self,
        namespace: &str,
        id: &str,
        owner: &Owner,
        now: Millis,
    ) -> StoreResult<Owner> {
        self.enter("bind_upstream_id")?;
        self.inner.bind_upstream_id(namespace, id, owner, now).await
    }
    async fn upstream_id_owner(&self, namespace: &str, id: &str) -> StoreResult<Option<Owner>> {
        self.enter("upstream_id_owner")?;
        self.inner.upstream_id_owner(namespace, id).await
    }
}
