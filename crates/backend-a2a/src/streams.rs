//! Following A2A tasks without a connection each: a bounded set of
//! `SubscribeToTask` streams shared by every agent of this process, and the
//! nudges that turn a stream's events into the task's next step.
//!
//! ```text
//! step (task working) ── watch(task, agent client, endpoint, A2A task) ──▶ Follower
//!     true: a stream is held for it (≤ max_streams at once) → the step waits long
//!     false: no stream (limit reached, agent said no, not running) → the step polls
//! stream task: SubscribeToTask ─ event ─▶ nudge(task), at most once per `gap`
//!              (a nudge the task could not take, because a step was running, is
//!              repeated a few times while the task is still followed)
//!              ─ stream ends (terminal, INPUT_REQUIRED) or breaks ─▶ a last nudge
//!              ─ open for STREAM_LIFETIME ─▶ SubscribeToTask again (same slot)
//!              ─ an event over its cap ─▶ no stream for STREAM_LIFETIME: the task polls
//! step (task asks, ends) ── forget(task) ──▶ the stream is dropped
//! sweep (every `sweep`) ─▶ drops registrations no step refreshed for long
//! ```
//!
//! A nudge only makes the task due: its step reads the task with `GetTask`
//! and maps that, so a stream event is never the source of truth and a missed
//! or repeated event costs one read at most. Nothing here is durable: a step
//! registers again each time it runs, so another instance that takes the task
//! over rebuilds the stream, and a stale one here is swept.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError, RwLock};
use std::time::Duration;

use agentgate_backend::{Nudge, TaskId};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::client::{AgentClient, CallError};

/// A nudge a task could not take (a step was running) is tried again after
/// this long, up to [`RENUDGES`] times.
const RENUDGE_AFTER: Duration = Duration::from_millis(200);
const RENUDGES: u32 = 15;

/// A stream is subscribed to afresh after this long. An agent (or a proxy)
/// may keep a stream open and quiet, or half-dead, for ever; a new
/// `SubscribeToTask` starts with the task as it is now, so whatever a stale
/// stream missed nudges the task then.
pub const STREAM_LIFETIME: Duration = Duration::from_secs(10 * 60);

/// Counters, for tests and the README's connection arithmetic.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FollowerStats {
    /// Streams held now.
    pub held: u64,
    /// The most streams held at once.
    pub max_held: u64,
    /// Streams opened (SubscribeToTask answered with a stream).
    pub opened: u64,
    /// Streams that could not be opened or broke off.
    pub failed: u64,
    /// Events received.
    pub events: u64,
    /// Nudges the engine took.
    pub nudges: u64,
}

#[derive(Debug)]
struct Entry {
    a2a_task: String,
    /// Set while a stream task runs for it.
    stream: Option<CancellationToken>,
    /// Which stream task is the entry's (an ended older one leaves it alone).
    generation: u64,
    /// No stream before this (after one failed or broke).
    not_before: Option<Instant>,
    refreshed: Instant,
}

/// The process's streams; one per backend, shared by its agents.
#[derive(Debug)]
pub struct Follower {
    max_streams: usize,
    /// Registrations older than this are dropped.
    stale_after: Duration,
    /// A stream is renewed after this long ([`STREAM_LIFETIME`]; shorter
    /// in tests).
    lifetime: Duration,
    /// Set by [`Follower::run`]; without it nothing is streamed.
    nudge: RwLock<Option<(Nudge, CancellationToken)>>,
    entries: Mutex<HashMap<TaskId, Entry>>,
    /// Numbers stream tasks, process-wide.
    generations: AtomicU64,
    held: AtomicU64,
    max_held: AtomicU64,
    opened: AtomicU64,
    failed: AtomicU64,
    events: AtomicU64,
    nudges: AtomicU64,
}

impl Follower {
    /// A follower holding at most `max_streams`; `safety` is how long a
    /// followed task waits between its own reads (registrations not
    /// refreshed for three times that are dropped).
    pub fn new(max_streams: usize, safety: Duration) -> Self {
        Self {
            max_streams,
            stale_after: safety.saturating_mul(3).max(Duration::from_secs(10)),
            lifetime: STREAM_LIFETIME,
            nudge: RwLock::new(None),
            entries: Mutex::new(HashMap::new()),
            generations: AtomicU64::new(0),
            held: AtomicU64::new(0),
            max_held: AtomicU64::new(0),
            opened: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            events: AtomicU64::new(0),
            nudges: AtomicU64::new(0),
        }
    }

    fn entries(&self) -> MutexGuard<'_, HashMap<TaskId, Entry>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The engine's nudge, once [`Follower::run`] started.
    pub fn nudger(&self) -> Option<Nudge> {
        self.nudge
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .map(|(n, _)| n.clone())
    }

    pub fn stats(&self) -> FollowerStats {
        FollowerStats {
            held: self.held.load(Ordering::Relaxed),
            max_held: self.max_held.load(Ordering::Relaxed),
            opened: self.opened.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
            events: self.events.load(Ordering::Relaxed),
            nudges: self.nudges.load(Ordering::Relaxed),
        }
    }

    /// Registers (or refreshes) `task`, which waits on A2A task `a2a_task`
    /// of the agent `client` calls at `endpoint`; returns whether a stream
    /// is held (or being opened) for it. `gap` is the least time between
    /// two nudges of the task.
    pub fn watch(
        self: &std::sync::Arc<Self>,
        task: &TaskId,
        client: &AgentClient,
        endpoint: &str,
        a2a_task: &str,
        gap: Duration,
    ) -> bool {
        let Some(shutdown) = self
            .nudge
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .map(|(_, s)| s.clone())
        else {
            return false;
        };
        let now = Instant::now();
        let mut entries = self.entries();
        let entry = entries.entry(task.clone()).or_insert_with(|| Entry {
            a2a_task: a2a_task.to_owned(),
            stream: None,
            generation: 0,
            not_before: None,
            refreshed: now,
        });
        entry.refreshed = now;
        if entry.a2a_task != a2a_task {
            if let Some(old) = entry.stream.take() {
                old.cancel();
            }
            entry.a2a_task = a2a_task.to_owned();
            entry.not_before = None;
        }
        if entry.stream.is_some() {
            return true;
        }
        // `held` counts stream tasks until they have ended (a cancelled one
        // may still be closing its connection), and is raised under the
        // lock: the limit holds for connections, not only registrations.
        let held = self.held.load(Ordering::Relaxed);
        let limit = u64::try_from(self.max_streams).unwrap_or(u64::MAX);
        if entry.not_before.is_some_and(|t| now < t) || held >= limit {
            return false;
        }
        let cancel = shutdown.child_token();
        entry.stream = Some(cancel.clone());
        let generation = self.generations.fetch_add(1, Ordering::Relaxed) + 1;
        entry.generation = generation;
        let held = self.held.fetch_add(1, Ordering::Relaxed) + 1;
        drop(entries);
        self.max_held.fetch_max(held, Ordering::Relaxed);
        tokio::spawn(self.clone().stream(
            task.clone(),
            generation,
            client.clone(),
            endpoint.to_owned(),
            a2a_task.to_owned(),
            gap,
            cancel,
        ));
        true
    }

    /// Stops following `task` (it asks the client, or ended).
    pub fn forget(&self, task: &TaskId) {
        if let Some(entry) = self.entries().remove(task)
            && let Some(stream) = entry.stream
        {
            stream.cancel();
        }
    }

    /// Whether `task` is still registered (a step may still need a nudge).
    fn followed(&self, task: &TaskId) -> bool {
        self.entries().contains_key(task)
    }

    /// Nudges `task`: whether the engine took it.
    async fn nudge(&self, task: &TaskId) -> bool {
        let Some(nudge) = self.nudger() else {
            return false;
        };
        match nudge.nudge(task).await {
            Ok(true) => {
                self.nudges.fetch_add(1, Ordering::Relaxed);
                true
            }
            Ok(false) => false,
            Err(e) => {
                tracing::warn!(task = %task, error = %e, "could not nudge an A2A task");
                false
            }
        }
    }

    /// One stream: opens it, nudges the task on its events (the first is
    /// the task as it is now, which may be newer than the step's read), and
    /// once more when the stream ends or breaks.
    #[allow(clippy::too_many_arguments)]
    fn stream(
        self: std::sync::Arc<Self>,
        task: TaskId,
        generation: u64,
        client: AgentClient,
        endpoint: String,
        a2a_task: String,
        gap: Duration,
        cancel: CancellationToken,
    ) -> agentgate_backend::BoxFuture<'static, ()> {
        // Boxed as `Send` here: the borrows across the select's awaits are
        // then checked at one concrete type.
        Box::pin(async move {
            self.stream_loop(task, generation, client, endpoint, a2a_task, gap, cancel)
                .await;
        })
    }

    #[allow(clippy::too_many_arguments)]
    async fn stream_loop(
        &self,
        task: TaskId,
        generation: u64,
        client: AgentClient,
        endpoint: String,
        a2a_task: String,
        gap: Duration,
        cancel: CancellationToken,
    ) {
        let opened = tokio::select! {
            () = cancel.cancelled() => return self.ended(&task, generation, None),
            opened = client.subscribe(&endpoint, &a2a_task) => opened,
        };
        // When to nudge next.
        let mut due: Option<Instant> = None;
        let mut broke = false;
        // An answer or event over its cap: the agent would send the same
        // again, so the task polls for a whole stream lifetime, instead of
        // reading up to the cap once more every `pause`.
        let mut oversized = false;
        let mut stream = match opened {
            Ok(stream) => {
                self.opened.fetch_add(1, Ordering::Relaxed);
                Some(stream)
            }
            Err(e) => {
                // Not offered for this task (ended meanwhile, or no
                // streaming after all): the task must poll, now.
                tracing::info!(%task, error = %e, "SubscribeToTask failed; the task is polled");
                self.failed.fetch_add(1, Ordering::Relaxed);
                broke = true;
                oversized = matches!(e, CallError::TooLarge { .. });
                due = Some(Instant::now());
                None
            }
        };
        let opened_at = Instant::now();
        let mut renew_at = opened_at + self.lifetime;
        let mut last_taken: Option<Instant> = None;
        let mut misses = 0;
        while stream.is_some() || due.is_some() {
            let wake = due.unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
            tokio::select! {
                () = cancel.cancelled() => return self.ended(&task, generation, None),
                () = tokio::time::sleep_until(renew_at), if stream.is_some() => {
                    // Renewed in place, keeping the slot: were the stream
                    // only ended, the step it nudged could find the slot
                    // still taken and wait for its slow read instead.
                    drop(stream.take());
                    let reopened = tokio::select! {
                        () = cancel.cancelled() => return self.ended(&task, generation, None),
                        reopened = client.subscribe(&endpoint, &a2a_task) => reopened,
                    };
                    match reopened {
                        Ok(renewed) => {
                            self.opened.fetch_add(1, Ordering::Relaxed);
                            stream = Some(renewed);
                            renew_at = Instant::now() + self.lifetime;
                        }
                        Err(e) => {
                            tracing::info!(%task, error = %e, "SubscribeToTask failed on renewal; the task is polled");
                            self.failed.fetch_add(1, Ordering::Relaxed);
                            broke = true;
                            oversized = matches!(e, CallError::TooLarge { .. });
                            due.get_or_insert_with(Instant::now);
                        }
                    }
                }
                () = tokio::time::sleep_until(wake), if due.is_some() => {
                    if self.nudge(&task).await {
                        last_taken = Some(Instant::now());
                        due = None;
                        misses = 0;
                    } else {
                        // A step was running (or the task asks the client
                        // now): again shortly, while it is still followed.
                        misses += 1;
                        due = (misses < RENUDGES && self.followed(&task))
                            .then(|| Instant::now() + RENUDGE_AFTER);
                    }
                }
                event = async {
                    match stream.as_mut() {
                        Some(s) => s.next().await,
                        None => std::future::pending().await,
                    }
                } => {
                    match event {
                        Ok(Some(_)) => {
                            self.events.fetch_add(1, Ordering::Relaxed);
                        }
                        Ok(None) => stream = None,
                        Err(e) => {
                            tracing::info!(%task, error = %e, "an A2A stream broke off");
                            self.failed.fetch_add(1, Ordering::Relaxed);
                            broke = true;
                            oversized = matches!(e, CallError::TooLarge { .. });
                            stream = None;
                        }
                    }
                    if due.is_none() {
                        let earliest = last_taken.map_or_else(Instant::now, |t| t + gap);
                        due = Some(earliest.max(Instant::now()));
                    }
                }
            }
        }
        // A broken stream is not opened again at once: the task polls a
        // while. Nor is one the agent closed right away (an agent that
        // ends every stream after its first event would otherwise be
        // subscribed to in a loop).
        let pause = gap.max(Duration::from_secs(1));
        let short = opened_at.elapsed() < pause;
        let pause = if oversized { self.lifetime } else { pause };
        self.ended(
            &task,
            generation,
            (broke || short).then(|| Instant::now() + pause),
        );
    }

    /// A stream ended: its slot is free; `not_before` keeps the next one off.
    fn ended(&self, task: &TaskId, generation: u64, not_before: Option<Instant>) {
        self.held.fetch_sub(1, Ordering::Relaxed);
        if let Some(entry) = self.entries().get_mut(task)
            && entry.generation == generation
        {
            entry.stream = None;
            if not_before.is_some() {
                entry.not_before = not_before;
            }
        }
    }

    /// Keeps the nudge handle and sweeps stale registrations until
    /// `shutdown`; then drops every stream.
    pub async fn run(&self, nudge: Nudge, shutdown: CancellationToken) {
        *self.nudge.write().unwrap_or_else(PoisonError::into_inner) =
            Some((nudge, shutdown.clone()));
        let sweep = (self.stale_after / 3).max(Duration::from_secs(1));
        loop {
            tokio::select! {
                () = shutdown.cancelled() => break,
                () = tokio::time::sleep(sweep) => {}
            }
            let stale = self.stale_after;
            self.entries().retain(|_, e| {
                let keep = e.refreshed.elapsed() < stale;
                if !keep && let Some(stream) = &e.stream {
                    stream.cancel();
                }
                keep
            });
        }
        *self.nudge.write().unwrap_or_else(PoisonError::into_inner) = None;
        for (_, entry) in self.entries().drain() {
            if let Some(stream) = entry.stream {
                stream.cancel();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::AtomicU64;

    use agentgate_backend::engine::NudgeTasks;
    use agentgate_backend::{NudgeError, UpstreamMetrics};
    use axum::response::IntoResponse;
    use futures::StreamExt as _;
    use serde_json::json;

    use super::*;
    use crate::client::Clients;

    /// Takes every nudge.
    struct Taken;

    impl NudgeTasks for Taken {
        fn nudge<'a>(
            &'a self,
            _: &'a TaskId,
        ) -> agentgate_backend::BoxFuture<'a, Result<bool, NudgeError>> {
            Box::pin(async { Ok(true) })
        }
    }

    /// An agent whose every `SubscribeToTask` stream sends one event and
    /// then stays open and quiet, or (`endless`) one event that never
    /// ends; counts the subscriptions.
    async fn agent(
        endless: bool,
        subscribed: Arc<AtomicU64>,
        seen: Arc<tokio::sync::Notify>,
    ) -> String {
        let router = axum::Router::new().fallback(move || {
            let subscribed = subscribed.clone();
            let seen = seen.clone();
            async move {
                subscribed.fetch_add(1, Ordering::Relaxed);
                seen.notify_one();
                let first: &'static [u8] = if endless {
                    b"data: "
                } else {
                    b"data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n"
                };
                let rest = futures::stream::repeat(axum::body::Bytes::from(vec![b'x'; 64 * 1024]))
                    .take_while(move |_| std::future::ready(endless));
                let body = futures::stream::once(std::future::ready(
                    axum::body::Bytes::from_static(first),
                ))
                .chain(rest)
                .chain(futures::stream::pending())
                .map(Ok::<_, std::convert::Infallible>);
                (
                    [(reqwest::header::CONTENT_TYPE, "text/event-stream")],
                    axum::body::Body::from_stream(body),
                )
                    .into_response()
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("its address"));
        tokio::spawn(async move { axum::serve(listener, router).await });
        url
    }

    /// A client of the agent at `url`, as the backend builds one.
    fn client(url: &str) -> AgentClient {
        let config = crate::A2aBackend::parse(Some(json!({"agents": [{"name": "h", "url": url}]})))
            .expect("the config parses");
        let settings = config.resolve(&|_| None).expect("the config resolves");
        let agent = &settings.agents[0];
        let guard = crate::guard::Guard::new(agent);
        let http = reqwest::Client::new();
        AgentClient::new(
            Clients {
                http: http.clone(),
                cards: http.clone(),
                streams: http.clone(),
            },
            crate::auth::Auth::new(&agent.credentials, &agent.at, http, guard.clone()),
            guard,
            UpstreamMetrics::detached("a2a"),
        )
    }

    /// A running follower whose streams live `lifetime`, following `task`
    /// (A2A task `t1` at `endpoint`).
    async fn following(
        lifetime: Duration,
        client: &AgentClient,
        endpoint: &str,
        task: &TaskId,
    ) -> (Arc<Follower>, CancellationToken) {
        let mut follower = Follower::new(4, Duration::from_secs(60));
        follower.lifetime = lifetime;
        let follower = Arc::new(follower);
        let shutdown = CancellationToken::new();
        tokio::spawn({
            let follower = follower.clone();
            let shutdown = shutdown.clone();
            async move { follower.run(Nudge::new(Taken), shutdown).await }
        });
        // `run` installs the nudge first thing; until then `watch` declines.
        tokio::time::timeout(Duration::from_secs(10), async {
            while !follower.watch(task, client, endpoint, "t1", Duration::ZERO) {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("the follower started");
        (follower, shutdown)
    }

    #[tokio::test]
    async fn a_stream_open_for_its_lifetime_is_subscribed_to_again_in_its_slot() {
        let subscribed = Arc::new(AtomicU64::new(0));
        let seen = Arc::new(tokio::sync::Notify::new());
        let url = agent(false, subscribed.clone(), seen.clone()).await;
        let client = client(&url);
        let task = TaskId::generate();
        let endpoint = format!("{url}/");
        let (follower, shutdown) =
            following(Duration::from_millis(200), &client, &endpoint, &task).await;

        // The quiet stream is renewed (and again), never let go of.
        tokio::time::timeout(Duration::from_secs(10), async {
            while subscribed.load(Ordering::Relaxed) < 3 {
                seen.notified().await;
            }
        })
        .await
        .expect("the stream was subscribed to again after its lifetime");
        let stats = follower.stats();
        assert!(stats.opened >= 2, "{stats:?}");
        assert_eq!(stats.failed, 0, "{stats:?}");
        assert_eq!(stats.max_held, 1, "renewed in its slot: {stats:?}");
        assert!(
            follower.watch(&task, &client, &endpoint, "t1", Duration::ZERO),
            "still held"
        );
        shutdown.cancel();
    }

    #[tokio::test]
    async fn an_event_over_its_cap_keeps_the_task_off_streams_for_a_lifetime() {
        let subscribed = Arc::new(AtomicU64::new(0));
        let seen = Arc::new(tokio::sync::Notify::new());
        let url = agent(true, subscribed.clone(), seen.clone()).await;
        let client = client(&url);
        let task = TaskId::generate();
        let endpoint = format!("{url}/");
        let lifetime = Duration::from_secs(3600);
        let (follower, shutdown) = following(lifetime, &client, &endpoint, &task).await;

        // The stream task ends (after its last nudge) with a pause set.
        let not_before = tokio::time::timeout(Duration::from_secs(30), async {
            loop {
                if let Some(entry) = follower.entries().get(&task)
                    && entry.stream.is_none()
                    && let Some(not_before) = entry.not_before
                {
                    return not_before;
                }
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("the oversized stream ended");
        assert_eq!(follower.stats().failed, 1, "{:?}", follower.stats());
        assert!(
            not_before > Instant::now() + lifetime / 2,
            "a stream is tried again {:?} from now",
            not_before - Instant::now()
        );
        assert!(
            !follower.watch(&task, &client, &endpoint, "t1", Duration::ZERO),
            "the task polls"
        );
        assert_eq!(subscribed.load(Ordering::Relaxed), 1);
        shutdown.cancel();
    }
}
