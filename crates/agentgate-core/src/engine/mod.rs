//! The scheduler: claims due tasks, runs one step each, saves the result.
//!
//! ```text
//! create (this process) ─▶ store.create_claimed ─▶ hand-off ─┐  (while slots are free)
//! loop:  store.claim(worker, free slots, lease) ──▶ spawn run_step per task
//!        run_step: heartbeat every lease/3 (stop the step if it cannot) ─┐
//!                  job.step(...) under the tool's step timeout
//!                  store.checkpoint(attempt = fencing token) ──▶ publish change
//!        sleep until the next due task, a wake-up, or a finished step
//! sweeper: every `sweep_every`, expire overdue tasks, delete old ended ones
//! ```
//!
//! Every wait here (sleeps, the heartbeat interval, the step timeout, the
//! backoffs, the shutdown drain) is measured on the engine's
//! [`Clock`], so tests drive them by moving a
//! [`ManualClock`](crate::clock::ManualClock).
//!
//! Leases make crashes harmless: a task whose process died is claimed again
//! once its lease runs out, from its last checkpoint. Fencing makes them safe:
//! a worker whose lease was taken over cannot overwrite the new owner's work.
//! Self-fencing keeps one step in one place: a step whose heartbeats fail is
//! stopped by its own process before its lease runs out, so it is not still
//! running when another process claims the task.
//!
//! Nor does a step loop: a result the store refuses (not an outage) or one
//! over [`EngineConfig::max_result_bytes`] fails the task instead of being
//! saved again and again, and the step is not run again for it.

mod runner;
mod tasks;
mod upstream_ids;

pub use tasks::{Changed, StorageQuota, TaskError, TaskQuota, TaskWatch, Tasks};

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentgate_backend::TaskId;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, broadcast, mpsc, watch};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::clock::Clock;
use crate::metrics::Metrics;
use crate::registry::ToolRegistry;
use crate::store::TaskStore;
use crate::store::seal::SealKey;
use crate::task::TaskRecord;

/// A task `create` leased to this process, with the step slot it runs in,
/// on its way to the claim loop.
type Handoff = (TaskRecord, OwnedSemaphorePermit);

/// Scheduler settings.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// This process's name in leases; unique per running instance.
    pub worker_id: String,
    /// Steps run at once by this process.
    pub concurrency: usize,
    /// How long a claim is valid without a heartbeat. A crashed process's
    /// tasks are picked up again after at most this long.
    pub lease: Duration,
    /// Longest sleep between looks at the store (other processes may have
    /// made tasks due).
    pub idle_poll: Duration,
    pub sweep_every: Duration,
    /// How long ended tasks are kept.
    pub retention: Duration,
    /// The longest a task may live, however much progress it makes (its
    /// TTL counts from its last progress, so without this a task whose
    /// backend keeps answering never expires). Past it, the sweeper expires
    /// the task and its backend's cancel runs. `None`: no bound. Default 30
    /// days.
    pub max_lifetime: Option<Duration>,
    /// Retryable failures in a row before a task fails, whatever `retry_for`
    /// or a tool's [`RetryPolicy`](agentgate_backend::RetryPolicy) says (a hard cap).
    pub max_retries: i64,
    /// Seals the secrets kept in the store (see [`crate::store::seal`]).
    /// The default is random, right for a store only this process uses;
    /// `agentgate serve` loads it from a key file every instance shares.
    pub store_key: SealKey,
    /// How long a task keeps retrying transient upstream failures (5xx,
    /// throttling, an upstream that is down) before it fails: an outage
    /// shorter than this only delays tasks. Measured on the tool's backoff
    /// schedule (by default 1 s doubling to 5 min), so real elapsed time is
    /// at least this. A tool's [`RetryPolicy`](agentgate_backend::RetryPolicy)
    /// may set its own.
    pub retry_for: Duration,
    /// The longest wait between retries of any tool, whatever its
    /// [`RetryPolicy`](agentgate_backend::RetryPolicy) says (by default 5 min,
    /// the default policy's own cap).
    pub max_backoff: Duration,
    /// The most bytes of JSON one step may store (its result or error, or
    /// its state, status and input requests). A step that produces more
    /// fails its task with an error naming this limit, rather than being
    /// stored (a database refuses rows past its own limits, and every read
    /// of the task would carry it). Default 4 MiB.
    pub max_result_bytes: usize,
}

/// [`EngineConfig::max_result_bytes`] by default: 4 MiB, far above any
/// tool result a client reads inline, far below PostgreSQL's 255 MB `jsonb`.
pub const DEFAULT_MAX_RESULT_BYTES: usize = 4 * 1024 * 1024;

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            worker_id: format!("agentgate-{}", TaskId::generate()),
            concurrency: 64,
            lease: Duration::from_secs(30),
            idle_poll: Duration::from_secs(1),
            sweep_every: Duration::from_secs(30),
            retention: Duration::from_secs(7 * 24 * 3600),
            max_lifetime: Some(Duration::from_secs(30 * 24 * 3600)),
            max_retries: 1000,
            retry_for: Duration::from_secs(3600),
            max_backoff: Duration::from_secs(300),
            max_result_bytes: DEFAULT_MAX_RESULT_BYTES,
            store_key: SealKey::generate(),
        }
    }
}

/// The engine: store, tools and scheduler, shared by every transport.
/// Crate-private: outside the crate, a task changes only through [`Tasks`]
/// and the engine runs only inside a [`Runtime`](crate::runtime::Runtime).
#[derive(Debug, Clone)]
pub(crate) struct Engine {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    store: Arc<dyn TaskStore>,
    /// The tools served now: replaced whole when a backend's tools change
    /// ([`Engine::replace_tools`]), watched by the gateways' sessions.
    tools: watch::Sender<Arc<ToolRegistry>>,
    clock: Arc<dyn Clock>,
    config: EngineConfig,
    metrics: Metrics,
    wake: Notify,
    changes: broadcast::Sender<TaskId>,
    /// Steps running in this process, to interrupt one when its task is
    /// cancelled.
    running: Mutex<HashMap<TaskId, CancellationToken>>,
    /// Per-owner locks of [`Tasks::create`]'s live-task cap.
    admissions: Vec<tokio::sync::Mutex<()>>,
    /// This process's step slots (`concurrency` permits): a step holds one
    /// from its claim (or hand-off) until it is saved.
    slots: Arc<Semaphore>,
    /// Where [`Tasks::create`] hands the claim loop a task it leased to
    /// this process; `Some` while [`Engine::run`] runs.
    handoff: Mutex<Option<mpsc::UnboundedSender<Handoff>>>,
    /// Which principal owns each upstream conversation and context, for
    /// every step's job context (kept in the store).
    upstream_ids: Arc<dyn agentgate_backend::engine::UpstreamIdBook>,
}

impl Engine {
    /// An engine that counts into `metrics`, made beforehand so the backends
    /// in `tools` could be handed their upstream counters.
    pub(crate) fn new(
        store: Arc<dyn TaskStore>,
        tools: ToolRegistry,
        clock: Arc<dyn Clock>,
        config: EngineConfig,
        metrics: Metrics,
    ) -> Self {
        let (changes, _) = broadcast::channel(1024);
        let slots = Arc::new(Semaphore::new(config.concurrency));
        let upstream_ids = Arc::new(upstream_ids::StoreUpstreamIds {
            store: Arc::clone(&store),
            clock: Arc::clone(&clock),
        });
        Self {
            inner: Arc::new(Inner {
                upstream_ids,
                store,
                tools: watch::Sender::new(Arc::new(tools)),
                clock,
                config,
                metrics,
                wake: Notify::new(),
                changes,
                running: Mutex::new(HashMap::new()),
                admissions: tasks::admission_stripes(),
                slots,
                handoff: Mutex::new(None),
            }),
        }
    }

    pub(crate) fn store(&self) -> &Arc<dyn TaskStore> {
        &self.inner.store
    }

    /// The tools served now. A step or request holds the registry it read
    /// for as long as it needs it, whatever changes meanwhile.
    pub(crate) fn tools(&self) -> Arc<ToolRegistry> {
        self.inner.tools.borrow().clone()
    }

    /// Serves `tools` from now on: a
    /// task of a tool no longer served waits for it to come back (for at
    /// most `retry_for`), as for a tool not listed yet. Returns whether they
    /// differ from the tools served before as a client sees them (and so
    /// [`Self::watch_tools`] receivers were told).
    pub(crate) fn replace_tools(&self, tools: ToolRegistry) -> bool {
        self.inner.tools.send_if_modified(|current| {
            let tools = tools.after(current);
            // Swapped in even when it looks the same, since its jobs are the
            // ones made now (a name may have moved to another server with
            // the same definition); told only when a client could see it.
            let visible = !current.same_tools(&tools);
            *current = Arc::new(tools);
            visible
        })
    }

    /// Tells its receiver each time the tools served change.
    pub(crate) fn watch_tools(&self) -> watch::Receiver<Arc<ToolRegistry>> {
        self.inner.tools.subscribe()
    }

    pub(crate) fn config(&self) -> &EngineConfig {
        &self.inner.config
    }

    pub(crate) fn metrics(&self) -> &Metrics {
        &self.inner.metrics
    }

    /// The engine clock's time.
    pub(crate) fn now(&self) -> agentgate_backend::Millis {
        self.inner.clock.now()
    }

    /// Tells the scheduler that a task may have become due.
    pub(crate) fn wake(&self) {
        self.inner.wake.notify_one();
    }

    /// Makes a task that waits for its next step due now (a watcher saw its
    /// upstream change). Returns whether it was waiting.
    pub(crate) async fn nudge(&self, id: &TaskId) -> crate::store::StoreResult<bool> {
        let nudged = self.inner.store.nudge(id, self.inner.clock.now()).await?;
        if nudged {
            self.wake();
        }
        Ok(nudged)
    }

    /// Announces that a task changed (a step was saved, input or a cancel
    /// arrived), for inline waiters and long polls in this process.
    pub(crate) fn publish(&self, id: &TaskId) {
        // No receivers is fine: nobody is waiting on this task.
        let _ = self.inner.changes.send(id.clone());
    }

    /// Changes to any task, as they happen in this process.
    pub(crate) fn subscribe(&self) -> broadcast::Receiver<TaskId> {
        self.inner.changes.subscribe()
    }

    /// Interrupts the step running for `id` in this process, if any, so a
    /// cancel is delivered without waiting for a long step to end.
    pub(crate) fn interrupt(&self, id: &TaskId) {
        if let Some(token) = self.running().get(id) {
            token.cancel();
        }
    }

    /// Acts on changes other instances made: wake the claim loop (a task
    /// may be due now), tell local waiters, and stop a local step whose task
    /// was cancelled elsewhere.
    async fn relay_changes(
        self,
        mut changes: broadcast::Receiver<crate::store::TaskChange>,
        shutdown: CancellationToken,
    ) {
        loop {
            let change = tokio::select! {
                () = shutdown.cancelled() => return,
                change = changes.recv() => change,
            };
            match change {
                Ok(change) => {
                    if change.kind == crate::store::ChangeKind::CancelRequested {
                        self.interrupt(&change.task);
                    }
                    self.publish(&change.task);
                    self.wake();
                }
                Err(broadcast::error::RecvError::Lagged(_)) => self.wake(),
                Err(broadcast::error::RecvError::Closed) => return,
            }
        }
    }

    /// Starts `task`'s step in `slot`, interruptible by a cancel or by
    /// `shutdown`; the slot is free again once the step is saved.
    fn spawn_step(
        &self,
        steps: &mut JoinSet<()>,
        task: TaskRecord,
        slot: Option<OwnedSemaphorePermit>,
        shutdown: &CancellationToken,
    ) {
        let token = shutdown.child_token();
        self.running().insert(task.id.clone(), token.clone());
        let engine = self.clone();
        steps.spawn(async move {
            engine.run_step(task, token).await;
            drop(slot);
        });
    }

    /// A step slot and the way to the claim loop, for a task `create` is
    /// about to make: `None` while the scheduler is not running or fewer
    /// than a quarter of the slots are free (those stay with the claim loop,
    /// so queued and retried tasks are not starved by new ones).
    fn handoff(&self) -> Option<(mpsc::UnboundedSender<Handoff>, OwnedSemaphorePermit)> {
        let sender = self.handoff_sender().clone()?;
        if self.inner.slots.available_permits() <= self.inner.config.concurrency / 4 {
            return None;
        }
        let slot = self.inner.slots.clone().try_acquire_owned().ok()?;
        Some((sender, slot))
    }

    fn handoff_sender(&self) -> std::sync::MutexGuard<'_, Option<mpsc::UnboundedSender<Handoff>>> {
        // The guarded value is a plain Option: a panic cannot leave it torn.
        self.inner
            .handoff
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    fn running(&self) -> std::sync::MutexGuard<'_, HashMap<TaskId, CancellationToken>> {
        // A poisoned map only means a step panicked while holding the lock;
        // the map itself is still consistent.
        self.inner
            .running
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    /// Runs the scheduler and sweeper until `shutdown` fires, then interrupts
    /// the running steps (a step in flight is dropped and runs again from its
    /// last checkpoint, like after a crash), waits up to the lease for them to
    /// wind up, and releases every lease still held.
    ///
    /// From the call on (before the future is first polled), tasks
    /// [`Tasks::create`]d here are handed to this scheduler.
    pub(crate) fn run(
        self,
        shutdown: CancellationToken,
    ) -> impl Future<Output = ()> + Send + 'static {
        let (handoff, handoffs) = mpsc::unbounded_channel();
        *self.handoff_sender() = Some(handoff);
        self.run_scheduler(shutdown, handoffs)
    }

    async fn run_scheduler(
        self,
        shutdown: CancellationToken,
        mut handoffs: mpsc::UnboundedReceiver<Handoff>,
    ) {
        let mut steps = JoinSet::new();
        // The sweeper and the change relay watch `shutdown` and are awaited
        // below: nothing of the engine outlives `run`.
        let mut helpers = JoinSet::new();
        helpers.spawn(self.clone().sweep_loop(shutdown.clone()));
        if let Some(changes) = self.inner.store.changes() {
            helpers.spawn(self.clone().relay_changes(changes, shutdown.clone()));
        }
        let config = self.inner.config.clone();
        let mut claims = Trouble::new("claiming due tasks");
        'claims: loop {
            // A finished step's task stays allocated in the set until it is
            // joined: reap them all, not one per loop, or a stream of
            // hand-offs (each its own loop) would pile them up.
            while steps.try_join_next().is_some() {}
            while let Ok((task, slot)) = handoffs.try_recv() {
                self.spawn_step(&mut steps, task, Some(slot), &shutdown);
            }
            // Slots are taken per claimed task, not held across the claim,
            // so `create` can hand off meanwhile; a claim that raced a
            // hand-off may run a step over `concurrency` for a moment.
            let free = self.inner.slots.available_permits();
            let mut claimed = 0;
            let mut backoff = None;
            // The instant this look is made at: the next look is reckoned
            // from it (see `next_look`).
            let now = self.inner.clock.now();
            if free > 0 {
                match self
                    .inner
                    .store
                    .claim(&config.worker_id, free, config.lease, now)
                    .await
                {
                    Ok(tasks) => {
                        claims.ok();
                        claimed = tasks.len();
                        for crate::store::Claimed {
                            task,
                            taken_over_from,
                        } in tasks
                        {
                            if let Some(previous) = taken_over_from
                                && previous != config.worker_id
                            {
                                tracing::info!(task = %task.id, %previous, "took over an expired lease");
                                self.inner.metrics.lease_taken_over();
                            }
                            let slot = self.inner.slots.clone().try_acquire_owned().ok();
                            self.spawn_step(&mut steps, task, slot, &shutdown);
                        }
                    }
                    Err(e) => backoff = Some(claims.failed(&e)),
                }
            }
            if let Some(pause) = backoff {
                // The store is failing: wait before asking again (wake-ups
                // would only bring the next failure sooner).
                tokio::select! {
                    _ = shutdown.cancelled() => break,
                    () = self.inner.clock.sleep(pause) => {}
                    Some(_) = steps.join_next(), if !steps.is_empty() => {}
                }
                continue;
            }
            if claimed > 0 && claimed == free {
                // There may be more due work; look again at once.
                tokio::task::yield_now().await;
                continue;
            }
            let next_look = self.next_look(now).await;
            // Hand-offs need no claim: wait on until something else happens.
            loop {
                tokio::select! {
                    _ = shutdown.cancelled() => break 'claims,
                    _ = self.inner.wake.notified() => {}
                    () = self.inner.clock.sleep_until(next_look) => {}
                    Some(_) = steps.join_next(), if !steps.is_empty() => {}
                    Some((task, slot)) = handoffs.recv() => {
                        while steps.try_join_next().is_some() {}
                        self.spawn_step(&mut steps, task, Some(slot), &shutdown);
                        continue;
                    }
                }
                break;
            }
        }
        // Tasks handed off but not started keep their lease until
        // `release_all` below gives it up; `create` releases one it could not
        // hand off at all.
        *self.handoff_sender() = None;
        drop(handoffs);
        // Steps watch the shutdown token and checkpoint an interruption.
        let drain = crate::clock::timeout(&*self.inner.clock, config.lease, async {
            while steps.join_next().await.is_some() {}
        });
        if drain.await.is_none() {
            // Only a step stuck saving to a store that does not answer gets
            // here; its lease runs out by itself.
            tracing::warn!(
                steps = steps.len(),
                "steps still saving after a lease; dropping them"
            );
            steps.abort_all();
        }
        while helpers.join_next().await.is_some() {}
        match self
            .inner
            .store
            .release_all(&config.worker_id, self.inner.clock.now())
            .await
        {
            Ok(n) if n > 0 => tracing::info!(released = n, "released leases on shutdown"),
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "releasing leases on shutdown failed"),
        }
    }

    /// When the claim loop looks at the store again, unless woken first:
    /// when the next task is due, or after `idle_poll` (other instances may
    /// have made tasks due), whichever is sooner. An instant, not a
    /// duration, so time that passes while the store answers is not waited
    /// out twice.
    ///
    /// A task already due that the claim just made did not take (no slot
    /// was free, another instance is claiming it, or, on PostgreSQL, its
    /// lease is still live by the server's clock while this instance's
    /// clock says it ran out) is not a reason to look again at once: that
    /// would spin. A step ending, a wake-up or `idle_poll` brings the next
    /// look.
    ///
    /// `claimed_at` is the time the claim looked at. A task that came due
    /// after it (the clock moved while the claim ran) was not passed over:
    /// it is looked for at its due time, which may be now. Reckoning from a
    /// fresh `now` instead would mistake it for one passed over and wait
    /// `idle_poll` for it, or, on a clock that only moves when told to (the
    /// tests' virtual time), for ever.
    async fn next_look(&self, claimed_at: agentgate_backend::Millis) -> agentgate_backend::Millis {
        let idle = self
            .inner
            .clock
            .now()
            .saturating_add(self.inner.config.idle_poll);
        match self.inner.store.next_due().await {
            Ok(Some(due)) if due > claimed_at => due.min(idle),
            Ok(Some(_) | None) => idle,
            Err(e) => {
                tracing::debug!(error = %e, "reading the next due task failed");
                idle
            }
        }
    }

    async fn sweep_loop(self, shutdown: CancellationToken) {
        let every = self.inner.config.sweep_every;
        let mut sweeps = Trouble::new("sweeping tasks");
        loop {
            let now = self.inner.clock.now();
            match self
                .inner
                .store
                .sweep(
                    now,
                    self.inner.config.retention,
                    self.inner.config.max_lifetime,
                )
                .await
            {
                Ok(report) if report.expired + report.deleted > 0 => {
                    sweeps.ok();
                    if report.expired > 0 {
                        // Expired tasks are due at once: their cancel runs.
                        self.wake();
                    }
                    tracing::info!(
                        expired = report.expired,
                        deleted = report.deleted,
                        "swept tasks"
                    );
                }
                Ok(_) => sweeps.ok(),
                Err(e) => {
                    sweeps.failed(&e);
                }
            }
            tokio::select! {
                _ = shutdown.cancelled() => return,
                () = self.inner.clock.sleep(every) => {}
            }
        }
    }
}

/// A store operation that keeps failing, said once when it starts failing
/// and once when it recovers (not once per loop), with the pause before the
/// next try: 100 ms doubling to 5 s.
#[derive(Debug)]
struct Trouble {
    what: &'static str,
    failures: u32,
    since: Option<std::time::Instant>,
}

impl Trouble {
    const FIRST_PAUSE: Duration = Duration::from_millis(100);
    const MAX_PAUSE: Duration = Duration::from_secs(5);

    fn new(what: &'static str) -> Self {
        Self {
            what,
            failures: 0,
            since: None,
        }
    }

    /// Records a failure; returns how long to wait before trying again.
    fn failed(&mut self, error: &crate::store::StoreError) -> Duration {
        if self.failures == 0 {
            self.since = Some(std::time::Instant::now());
            tracing::warn!(error = %error, "{} failed; retrying with backoff until it works", self.what);
        } else {
            tracing::debug!(error = %error, failures = self.failures + 1, "{} failed again", self.what);
        }
        self.failures = self.failures.saturating_add(1);
        Self::pause(self.failures)
    }

    /// Records a success, saying so if it ends a run of failures.
    fn ok(&mut self) {
        if self.failures > 0 {
            let secs = self.since.map_or(0.0, |t| t.elapsed().as_secs_f64());
            tracing::info!(
                failures = self.failures,
                seconds = format!("{secs:.1}"),
                "{} works again",
                self.what
            );
            self.failures = 0;
            self.since = None;
        }
    }

    /// The pause after `failures` failures in a row.
    fn pause(failures: u32) -> Duration {
        let doubled = Self::FIRST_PAUSE.saturating_mul(1 << failures.saturating_sub(1).min(16));
        doubled.min(Self::MAX_PAUSE)
    }
}

#[cfg(test)]
mod tests {
    use super::Trouble;
    use std::time::Duration;

    #[test]
    fn store_trouble_backs_off_from_100_ms_to_5_s() {
        let pauses: Vec<u64> = [1, 2, 3, 6, 7, 40, u32::MAX]
            .into_iter()
            .map(|n| agentgate_backend::engine::wire_ms(Trouble::pause(n)))
            .collect();
        assert_eq!(pauses, [100, 200, 400, 3200, 5000, 5000, 5000]);
        assert_eq!(Trouble::pause(0), Duration::from_millis(100));
    }
}
