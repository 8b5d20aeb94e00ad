//! A [`TaskStore`] that forwards every call to another store and counts the
//! calls by method, so a test can see which requests reach the store (e.g.
//! which polls a cache answers) without a hand-written forwarding store.
//!
//! ```ignore
//! let store = Arc::new(StoreSpy::new(SqliteStore::open(..).await?));
//! // … run the gateway on `store.clone()` …
//! assert_eq!(store.calls("get"), 1);
//! ```

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use agentgate_core::clock::Millis;
use agentgate_core::store::{
    Claimed, InputAck, StoreResult, SweepReport, TaskChange, TaskCount, TaskStore,
};
use agentgate_core::task::{NewTask, Outcome, Owner, TaskId, TaskRecord};
use async_trait::async_trait;
use serde_json::Value;

/// `inner` with a call counter per [`TaskStore`] method.
#[derive(Debug)]
pub struct StoreSpy<S> {
    inner: S,
    calls: Mutex<BTreeMap<&'static str, u64>>,
}

impl<S: TaskStore> StoreSpy<S> {
    pub fn new(inner: S) -> Self {
        Self {
            inner,
            calls: Mutex::default(),
        }
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
}

#[async_trait]
impl<S: TaskStore> TaskStore for StoreSpy<S> {
    async fn create(&self, task: NewTask) -> StoreResult<TaskRecord> {
        self.count("create");
        self.inner.create(task).await
    }
    async fn get(
        &self,
        owner: &Owner,
        id: &TaskId,
        now: Millis,
    ) -> StoreResult<Option<TaskRecord>> {
        self.count("get");
        self.inner.get(owner, id, now).await
    }
    async fn record_input(
        &self,
        owner: &Owner,
        id: &TaskId,
        responses: BTreeMap<String, Value>,
        now: Millis,
    ) -> StoreResult<InputAck> {
        self.count("record_input");
        self.inner.record_input(owner, id, responses, now).await
    }
    async fn request_cancel(&self, owner: &Owner, id: &TaskId, now: Millis) -> StoreResult<()> {
        self.count("request_cancel");
        self.inner.request_cancel(owner, id, now).await
    }
    async fn claim(
        &self,
        worker: &str,
        limit: usize,
        lease: Duration,
        now: Millis,
    ) -> StoreResult<Vec<Claimed>> {
        self.count("claim");
        self.inner.claim(worker, limit, lease, now).await
    }
    async fn heartbeat(
        &self,
        id: &TaskId,
        worker: &str,
        attempt: i64,
        lease_until: Millis,
    ) -> StoreResult<()> {
        self.count("heartbeat");
        self.inner.heartbeat(id, worker, attempt, lease_until).await
    }
    async fn checkpoint(
        &self,
        id: &TaskId,
        worker: &str,
        attempt: i64,
        outcome: Outcome,
        now: Millis,
    ) -> StoreResult<TaskRecord> {
        self.count("checkpoint");
        self.inner
            .checkpoint(id, worker, attempt, outcome, now)
            .await
    }
    async fn release(
        &self,
        id: &TaskId,
        worker: &str,
        attempt: i64,
        now: Millis,
    ) -> StoreResult<()> {
        self.count("release");
        self.inner.release(id, worker, attempt, now).await
    }
    async fn nudge(&self, id: &TaskId, now: Millis) -> StoreResult<bool> {
        self.count("nudge");
        self.inner.nudge(id, now).await
    }
    async fn release_all(&self, worker: &str, now: Millis) -> StoreResult<u64> {
        self.count("release_all");
        self.inner.release_all(worker, now).await
    }
    async fn next_due(&self) -> StoreResult<Option<Millis>> {
        self.count("next_due");
        self.inner.next_due().await
    }
    async fn count_by_tool_and_status(&self) -> StoreResult<Vec<TaskCount>> {
        self.count("count_by_tool_and_status");
        self.inner.count_by_tool_and_status().await
    }
    async fn count_active(&self, owner: &Owner, now: Millis) -> StoreResult<u64> {
        self.count("count_active");
        self.inner.count_active(owner, now).await
    }
    async fn sweep(&self, now: Millis, retention: Duration) -> StoreResult<SweepReport> {
        self.count("sweep");
        self.inner.sweep(now, retention).await
    }
    fn changes(&self) -> Option<tokio::sync::broadcast::Receiver<TaskChange>> {
        self.count("changes");
        self.inner.changes()
    }
    async fn secret(&self, name: &str, fresh: Vec<u8>) -> StoreResult<Vec<u8>> {
        self.count("secret");
        self.inner.secret(name, fresh).await
    }
    async fn replace_secret(&self, name: &str, old: &[u8], new: Vec<u8>) -> StoreResult<bool> {
        self.count("replace_secret");
        self.inner.replace_secret(name, old, new).await
    }
}
