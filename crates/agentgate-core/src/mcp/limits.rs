//! Per-principal limits and caps, so one client cannot starve the others or
//! the store.
//!
//! Everything is keyed by the [`Owner`] the gateway resolves for a request
//! (the authenticated principal over HTTP, [`Owner::anonymous`] without
//! authentication, the local user on stdio), and measured on the engine's
//! clock, so tests move time instead of sleeping.
//!
//! - **Concurrent tasks**: a `tools/call` that would create a task is refused
//!   while the principal already has [`Limits::max_active_tasks`] live
//!   (`working` / `input_required`) tasks. The count comes from the store
//!   ([`TaskStore::count_active`](crate::store::TaskStore::count_active)), so
//!   it holds across instances. It is a soft cap: calls racing each other on
//!   different instances may each see room and overshoot by a few. The inline
//!   path (clients without the tasks extension) creates the same durable
//!   task, so it counts and is refused alike; the MRTR retry of an inline call
//!   (`requestState`) continues an existing task and is never refused by it.
//! - **Stored tasks and bytes**: a `tools/call` that would create a task
//!   is refused while the principal keeps [`Limits::max_stored_tasks`]
//!   tasks stored (live and ended: an ended task stays until the sweeper
//!   deletes it, `engine.retention_hours` after it ended) or their rows
//!   hold [`Limits::max_stored_bytes`] of JSON (arguments, state, input,
//!   results, errors). Without it, a create-then-cancel loop fills the disk,
//!   and then every principal's writes fail. Counted in the store
//!   ([`TaskStore::stored_usage`](crate::store::TaskStore::stored_usage),
//!   an index-only read of at most `max_stored_tasks` entries), so it holds
//!   across instances, and soft like the live-task cap. The refusal's
//!   `retryAfterMs` is when the principal's oldest ended task is swept.
//! - **Request rate**: a token bucket per principal ([`RateLimiter`]),
//!   refilling [`Limits::requests_per_second`] up to [`Limits::request_burst`]
//!   tokens, charged for `tools/call`, `tools/list` and every `tasks/*`
//!   request. Memory is bounded: at most [`Limits::max_principals`] buckets
//!   are kept; a bucket that has refilled is indistinguishable from a new one
//!   and is dropped first, then the longest-idle one. Per instance: with
//!   several instances behind a balancer the effective rate is up to N times
//!   the setting.
//! - **Fast `tasks/get` polling** ([`PollCache`]): the answer read from the
//!   store is kept per task, rendered as the client gets it (never the
//!   stored record with its arguments and checkpoint), for the
//!   `pollIntervalMs` it advertised; a poll within that window is answered
//!   from memory unless the task changed meanwhile (the engine's change
//!   notices, which include other instances' changes on PostgreSQL, drop the
//!   entry). The cache holds at most [`Limits::poll_cache_bytes`] of answers
//!   (an answer bigger than a sixteenth of that is not kept), so many big
//!   results cannot grow the process. More than [`Limits::poll_burst`] polls
//!   of one task within one interval are refused, telling the client the
//!   interval to use. Ended tasks have no interval; their answer is kept for
//!   [`TERMINAL_WINDOW`], never refused.
//! - **Listens** (`subscriptions/listen` with `taskIds`): a listen costs one
//!   request of the principal's rate per task it names (each is a store read
//!   at once and on every change), and a principal holds at most
//!   [`Limits::max_listens`] open at once. `initialize` and `server/discover`
//!   are charged like any request.
//! - **Caps**: `inputResponses` (in `tasks/update` and in an MRTR retry of
//!   `tools/call`) may be at most [`Limits::max_input_response_bytes`] of
//!   JSON, and a tool's task TTL is clamped to [`Limits::max_ttl`] (the Tasks
//!   extension lets the server choose the TTL: clients cannot ask for one,
//!   and the actual value is reported as `ttlMs`).
//!
//! Refusals for load are JSON-RPC errors with code [`LIMITED`] whose message
//! says the limit, what was seen and the config key, and whose `data` carries
//! `retryAfterMs` and `configKey`. Oversized input is `-32602` naming the
//! field.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentgate_backend::{Millis, Owner, TaskId};
use rmcp::model::{DetailedTask, ErrorData};
use serde_json::json;
use tokio::sync::broadcast::{self, error::TryRecvError};

use super::error::GatewayError;
use crate::engine::StorageQuota;
use crate::task::TaskRecord;

pub use super::error::LIMITED;

/// How long the answer for an ended task is served from memory: it has no
/// poll interval to go by, and it changes only by expiring.
pub const TERMINAL_WINDOW: Duration = Duration::from_secs(1);

/// How many tasks' last answers the poll cache keeps at most.
const MAX_CACHED_TASKS: usize = 10_000;

/// The limits one gateway enforces. [`Limits::default`] holds the documented
/// defaults of the `[limits]` config section.
#[derive(Debug, Clone, PartialEq)]
pub struct Limits {
    /// Live tasks one principal may have at once; 0 = no cap.
    pub max_active_tasks: u64,
    /// Sustained requests per second per principal; 0 = no rate limit.
    pub requests_per_second: f64,
    /// Requests a principal may make at once after being idle.
    pub request_burst: u32,
    /// Most principals whose request rate is tracked at once.
    pub max_principals: usize,
    /// `tasks/get` polls of one task allowed within one `pollIntervalMs`
    /// (the one that reads the store included); 0 = never refused.
    pub poll_burst: u32,
    /// Largest `inputResponses` accepted, in bytes of JSON.
    pub max_input_response_bytes: usize,
    /// Longest task TTL; a tool asking for more (or for none) gets this.
    pub max_ttl: Option<Duration>,
    /// Bytes of rendered `tasks/get` answers the poll cache keeps at most
    /// (their JSON size); 0 = no cache.
    pub poll_cache_bytes: usize,
    /// `subscriptions/listen` streams one principal may hold open at once
    /// (per instance); 0 = no cap.
    pub max_listens: u32,
    /// Tasks one principal may keep stored, live and ended; 0 = no quota.
    pub max_stored_tasks: u64,
    /// Bytes of JSON one principal's stored tasks may hold; 0 = no quota.
    pub max_stored_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_active_tasks: 200,
            requests_per_second: 100.0,
            request_burst: 500,
            max_principals: 10_000,
            poll_burst: 20,
            max_input_response_bytes: 1024 * 1024,
            max_ttl: Some(Duration::from_secs(7 * 24 * 3600)),
            poll_cache_bytes: 32 * 1024 * 1024,
            max_listens: 16,
            max_stored_tasks: 10_000,
            max_stored_bytes: 1024 * 1024 * 1024,
        }
    }
}

fn limited(message: String, retry_after: Duration, config_key: &'static str) -> ErrorData {
    GatewayError::Limited {
        message,
        retry_after,
        config_key,
    }
    .into()
}

/// The refusal of a create while the principal is at a storage quota
/// (`TaskError::StorageFull`).
pub(crate) fn storage_full(
    what: StorageQuota,
    limit: u64,
    seen: u64,
    retry_after: Duration,
) -> ErrorData {
    let (config_key, stored) = match what {
        StorageQuota::Tasks => ("limits.max_stored_tasks", "tasks stored"),
        StorageQuota::Bytes => ("limits.max_stored_bytes", "bytes of stored tasks"),
    };
    let mut error = limited(
        format!(
            "storage quota reached: this principal has {seen} {stored} (live and ended) and the \
             quota is {limit} ({config_key}); ended tasks are deleted engine.retention_hours \
             after they end, so room comes back as they are swept"
        ),
        retry_after,
        config_key,
    );
    if let Some(data) = error.data.as_mut().and_then(|d| d.as_object_mut()) {
        data.insert("limit".into(), json!(limit));
        data.insert("stored".into(), json!(seen));
    }
    error
}

/// The refusal for `inputResponses` over the cap.
pub(crate) fn input_too_large(size: usize, limit: usize) -> ErrorData {
    super::error::invalid_field(
        "inputResponses",
        format!(
            "field `inputResponses` is {size} bytes of JSON, over the {limit}-byte limit \
             (limits.max_input_response_bytes); send smaller answers, or fewer keys per request \
             (partial answers are allowed)"
        ),
        Some(json!({ "size": size, "limit": limit })),
    )
}

/// Checks the size of `inputResponses` against the cap.
pub(crate) fn check_input_size(
    responses: &rmcp::model::InputResponses,
    limit: usize,
) -> Result<(), ErrorData> {
    let size = serde_json::to_vec(responses).map_or(usize::MAX, |v| v.len());
    if size > limit {
        return Err(input_too_large(size, limit));
    }
    Ok(())
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Millis,
}

/// Token buckets per principal, at most `max_principals` of them.
#[derive(Debug)]
pub struct RateLimiter {
    rate: f64,
    burst: f64,
    max_principals: usize,
    buckets: Mutex<HashMap<Owner, Bucket>>,
}

impl RateLimiter {
    pub fn new(requests_per_second: f64, burst: u32, max_principals: usize) -> Self {
        Self {
            rate: requests_per_second,
            burst: f64::from(burst.max(1)),
            max_principals: max_principals.max(1),
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// Takes one token from `owner`'s bucket, or says how long until one
    /// is there.
    pub fn check(&self, owner: &Owner, now: Millis) -> Result<(), Duration> {
        self.check_n(owner, now, 1)
    }

    /// Takes `cost` tokens (at least one) from `owner`'s bucket at once, or
    /// says how long until they are there. A cost over the burst can never
    /// be paid; the caller refuses it before asking.
    pub fn check_n(&self, owner: &Owner, now: Millis, cost: u32) -> Result<(), Duration> {
        if self.rate <= 0.0 {
            return Ok(());
        }
        let cost = f64::from(cost.max(1));
        // A poisoned lock only means another request panicked mid-update;
        // the buckets are still usable numbers.
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        if !buckets.contains_key(owner) && buckets.len() >= self.max_principals {
            self.evict(&mut buckets, now);
        }
        let bucket = buckets.entry(owner.clone()).or_insert(Bucket {
            tokens: self.burst,
            at: now,
        });
        let elapsed = now.since(bucket.at).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * self.rate).min(self.burst);
        bucket.at = bucket.at.max(now);
        if bucket.tokens >= cost {
            bucket.tokens -= cost;
            Ok(())
        } else {
            let wait = (cost - bucket.tokens) / self.rate;
            Err(Duration::from_secs_f64(wait).max(Duration::from_millis(1)))
        }
    }

    /// How many principals are tracked now.
    pub fn tracked(&self) -> usize {
        self.buckets.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Makes room for one more bucket: drops every bucket that has refilled
    /// (forgetting it changes nothing), else the longest-idle one.
    fn evict(&self, buckets: &mut HashMap<Owner, Bucket>, now: Millis) {
        let (rate, burst) = (self.rate, self.burst);
        buckets.retain(|_, b| {
            let elapsed = now.since(b.at).as_secs_f64();
            b.tokens + elapsed * rate < burst
        });
        if buckets.len() >= self.max_principals
            && let Some(oldest) = buckets
                .iter()
                .min_by_key(|(_, b)| b.at)
                .map(|(owner, _)| owner.clone())
        {
            buckets.remove(&oldest);
        }
    }
}

#[derive(Debug)]
struct Entry {
    owner: Owner,
    /// When the task expires (its TTL from creation), if it does.
    expires_at: Option<Millis>,
    answer: Arc<DetailedTask>,
    /// The answer's size as JSON, counted against the byte budget.
    bytes: usize,
    read_at: Millis,
    window: Duration,
    advertised: bool,
    polls: u32,
}

/// What the poll cache says about a `tasks/get`.
#[derive(Debug)]
enum Poll {
    /// Within the window of the last store read: this answer, from memory.
    Cached(Arc<DetailedTask>),
    /// Polled more than the burst within one advertised interval.
    TooFast { interval: Duration, polls: u32 },
    /// Read the store, then [`PollCache::remember`] the answer with this
    /// ticket.
    Read(Ticket),
}

/// Taken before a store read, so [`PollCache::remember`] can tell whether
/// the task changed while it was read.
#[derive(Debug, Clone, Copy)]
struct Ticket(u64);

#[derive(Debug)]
struct CacheState {
    entries: HashMap<TaskId, Entry>,
    /// The sum of the entries' `bytes`.
    bytes: usize,
    changes: broadcast::Receiver<TaskId>,
    /// Change notices seen so far.
    seen: u64,
    /// The notice number of each task's last change (bounded; see `floor`).
    changed: HashMap<TaskId, u64>,
    /// Changes up to this notice are no longer told apart by task: a read
    /// with an older ticket is not kept.
    floor: u64,
}

impl CacheState {
    fn remove(&mut self, id: &TaskId) {
        if let Some(entry) = self.entries.remove(id) {
            self.bytes -= entry.bytes;
        }
    }

    fn clear(&mut self) {
        self.entries.clear();
        self.bytes = 0;
    }

    /// Drops the entries whose window has passed, then, while `bytes` more
    /// would not fit in `budget` or `count` more would pass the entry cap,
    /// the oldest reads.
    fn make_room(&mut self, bytes: usize, budget: usize, now: Millis) {
        let fits =
            |state: &Self| state.bytes + bytes <= budget && state.entries.len() < MAX_CACHED_TASKS;
        if fits(self) {
            return;
        }
        self.entries
            .retain(|_, e| now < e.read_at.saturating_add(e.window));
        self.bytes = self.entries.values().map(|e| e.bytes).sum();
        if fits(self) {
            return;
        }
        let mut by_age: Vec<(Millis, TaskId)> = self
            .entries
            .iter()
            .map(|(id, e)| (e.read_at, id.clone()))
            .collect();
        by_age.sort_unstable();
        for (_, id) in by_age {
            if fits(self) {
                break;
            }
            self.remove(&id);
        }
    }

    /// Drops the entries of tasks that changed since the last call.
    fn forget_changed(&mut self) {
        loop {
            match self.changes.try_recv() {
                Ok(id) => {
                    self.seen += 1;
                    self.remove(&id);
                    if self.changed.len() >= MAX_CACHED_TASKS {
                        self.changed.clear();
                        self.floor = self.seen;
                    }
                    self.changed.insert(id, self.seen);
                }
                // Missed notices: any entry may be stale.
                Err(TryRecvError::Lagged(_)) => {
                    self.seen += 1;
                    self.floor = self.seen;
                    self.clear();
                    self.changed.clear();
                }
                Err(TryRecvError::Empty | TryRecvError::Closed) => return,
            }
        }
    }
}

/// The last `tasks/get` answer per task, for polls faster than the interval
/// it advertised; see the module docs.
#[derive(Debug)]
pub struct PollCache {
    burst: u32,
    /// The most bytes of answers kept.
    budget: usize,
    state: Mutex<CacheState>,
}

impl PollCache {
    /// `changes` is the engine's change feed, subscribed before any read;
    /// at most `budget` bytes of answers are kept.
    pub fn new(poll_burst: u32, budget: usize, changes: broadcast::Receiver<TaskId>) -> Self {
        Self {
            burst: poll_burst,
            budget,
            state: Mutex::new(CacheState {
                entries: HashMap::new(),
                bytes: 0,
                changes,
                seen: 0,
                changed: HashMap::new(),
                floor: 0,
            }),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, CacheState> {
        // A poisoned lock only means a request panicked mid-update; at worst
        // an entry is stale by one poll interval.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Decides how to answer `owner`'s `tasks/get` of `id` at `now`.
    fn poll(&self, owner: &Owner, id: &TaskId, now: Millis) -> Poll {
        let mut state = self.state();
        state.forget_changed();
        let ticket = Ticket(state.seen);
        let Some(entry) = state.entries.get_mut(id) else {
            return Poll::Read(ticket);
        };
        // Another owner's poll of this id is a plain miss: the store answers
        // it as unknown, and the owner's entry is left alone.
        if &entry.owner != owner {
            return Poll::Read(ticket);
        }
        if now >= entry.read_at.saturating_add(entry.window)
            || now < entry.read_at
            || entry.expires_at.is_some_and(|at| at <= now)
        {
            state.remove(id);
            return Poll::Read(ticket);
        }
        entry.polls = entry.polls.saturating_add(1);
        if entry.advertised && self.burst > 0 && entry.polls > self.burst {
            return Poll::TooFast {
                interval: entry.window,
                polls: entry.polls,
            };
        }
        Poll::Cached(Arc::clone(&entry.answer))
    }

    /// Keeps `answer`, rendered from `record` as read from the store at
    /// `now`, for the interval it advertises (`None` for an ended task),
    /// unless the task changed since `ticket` was taken (the read may
    /// predate the change) or the answer is too big to be worth its room.
    fn remember(
        &self,
        record: &TaskRecord,
        answer: &DetailedTask,
        interval: Option<Duration>,
        now: Millis,
        ticket: Ticket,
    ) {
        // A big answer (a long result) would push out many small ones, and
        // a client polls it at most a few times before it is done.
        let bytes = serde_json::to_vec(answer).map_or(usize::MAX, |v| v.len());
        if bytes > self.budget / 16 {
            return;
        }
        let mut state = self.state();
        state.forget_changed();
        let changed_since = state.floor > ticket.0
            || state
                .changed
                .get(&record.id)
                .is_some_and(|&at| at > ticket.0);
        if changed_since {
            return;
        }
        state.remove(&record.id);
        state.make_room(bytes, self.budget, now);
        let window = interval.unwrap_or(TERMINAL_WINDOW);
        let expires_at = record.expires_at;
        state.bytes += bytes;
        state.entries.insert(
            record.id.clone(),
            Entry {
                owner: record.owner.clone(),
                expires_at,
                answer: Arc::new(answer.clone()),
                bytes,
                read_at: now,
                window,
                advertised: interval.is_some(),
                polls: 1,
            },
        );
    }

    /// Bytes of answers kept now.
    pub fn bytes(&self) -> usize {
        self.state().bytes
    }

    /// Answers kept now.
    pub fn len(&self) -> usize {
        self.state().entries.len()
    }

    /// Whether no answer is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A gateway's limits with their state.
#[derive(Debug)]
pub(crate) struct Guard {
    pub limits: Limits,
    pub rate: RateLimiter,
    pub polls: PollCache,
    /// Open listens per principal.
    listens: Arc<Mutex<HashMap<Owner, u32>>>,
}

/// One open listen, counted against its principal until dropped.
#[derive(Debug)]
pub(crate) struct ListenSlot {
    owner: Owner,
    listens: Arc<Mutex<HashMap<Owner, u32>>>,
}

impl Drop for ListenSlot {
    fn drop(&mut self) {
        let mut listens = self.listens.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(open) = listens.get_mut(&self.owner) {
            *open = open.saturating_sub(1);
            if *open == 0 {
                listens.remove(&self.owner);
            }
        }
    }
}

impl Guard {
    pub(crate) fn new(limits: Limits, changes: broadcast::Receiver<TaskId>) -> Self {
        Self {
            rate: RateLimiter::new(
                limits.requests_per_second,
                limits.request_burst,
                limits.max_principals,
            ),
            polls: PollCache::new(limits.poll_burst, limits.poll_cache_bytes, changes),
            listens: Arc::default(),
            limits,
        }
    }

    /// Opens a listen of `tasks` task ids for `owner`: charges one request
    /// per task to its rate and takes one of its listen slots.
    pub(crate) fn open_listen(
        &self,
        owner: &Owner,
        tasks: usize,
        now: Millis,
    ) -> Result<ListenSlot, ErrorData> {
        let cost = u32::try_from(tasks).unwrap_or(u32::MAX).max(1);
        if self.limits.requests_per_second > 0.0 && cost > self.limits.request_burst {
            return Err(super::error::invalid_field(
                "params.notifications.taskIds",
                format!(
                    "`params.notifications.taskIds` names {tasks} tasks; a listen costs one \
                     request per task and this principal may make at most {} at once \
                     (limits.request_burst): split the ids over several listens",
                    self.limits.request_burst
                ),
                Some(json!({"limit": self.limits.request_burst})),
            ));
        }
        self.rate.check_n(owner, now, cost).map_err(|wait| {
            limited(
                format!(
                    "too many requests: a listen of {tasks} tasks costs {cost} requests, over \
                     {} requests per second (burst {}) for this principal \
                     (limits.requests_per_second, limits.request_burst); retry in {} ms",
                    self.limits.requests_per_second,
                    self.limits.request_burst,
                    wait.as_millis().max(1)
                ),
                wait,
                "limits.requests_per_second",
            )
        })?;
        let mut listens = self.listens.lock().unwrap_or_else(|e| e.into_inner());
        let open = listens.entry(owner.clone()).or_insert(0);
        if self.limits.max_listens > 0 && *open >= self.limits.max_listens {
            let open = *open;
            if open == 0 {
                listens.remove(owner);
            }
            return Err(limited(
                format!(
                    "too many open listens: this principal has {open} subscriptions/listen \
                     streams open, the most allowed (limits.max_listens); close one, or name \
                     several tasks in one listen"
                ),
                Duration::from_secs(1),
                "limits.max_listens",
            ));
        }
        *open += 1;
        Ok(ListenSlot {
            owner: owner.clone(),
            listens: Arc::clone(&self.listens),
        })
    }

    /// Charges one request to `owner`'s rate.
    pub(crate) fn admit(&self, owner: &Owner, now: Millis) -> Result<(), ErrorData> {
        self.rate.check(owner, now).map_err(|wait| {
            limited(
                format!(
                    "too many requests: over {} requests per second (burst {}) for this \
                     principal (limits.requests_per_second, limits.request_burst); retry in {} ms",
                    self.limits.requests_per_second,
                    self.limits.request_burst,
                    wait.as_millis().max(1)
                ),
                wait,
                "limits.requests_per_second",
            )
        })
    }

    /// Answers `owner`'s `tasks/get` of `id` at `now`, reading through
    /// the poll cache: from memory within the window of the last read,
    /// refused when polled faster than the burst allows, otherwise by
    /// `read` (the task as the task service has it, rendered), which is
    /// kept for the next poll over the interval it advertises.
    pub(crate) async fn poll_task<F, Fut>(
        &self,
        owner: &Owner,
        id: &TaskId,
        now: Millis,
        read: F,
    ) -> Result<DetailedTask, ErrorData>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<(TaskRecord, DetailedTask), ErrorData>>,
    {
        match self.polls.poll(owner, id, now) {
            Poll::Cached(answer) => Ok(DetailedTask::clone(&answer)),
            Poll::TooFast { interval, polls } => Err(self.too_fast(id, interval, polls)),
            Poll::Read(ticket) => {
                let (record, answer) = read().await?;
                let interval = answer.task.poll_interval_ms.map(Duration::from_millis);
                self.polls.remember(&record, &answer, interval, now, ticket);
                Ok(answer)
            }
        }
    }

    /// The refusal for polling one task too fast.
    fn too_fast(&self, id: &TaskId, interval: Duration, polls: u32) -> ErrorData {
        let ms = agentgate_backend::engine::wire_ms(interval);
        let mut error = limited(
            format!(
                "tasks/get polled too fast: task {id} was polled {polls} times within its \
                 pollIntervalMs of {ms} ms, more than {} (limits.poll_burst); slow down and wait \
                 {ms} ms (the task's pollIntervalMs) between polls",
                self.limits.poll_burst
            ),
            interval,
            "limits.poll_burst",
        );
        if let Some(data) = error.data.as_mut().and_then(|d| d.as_object_mut()) {
            data.insert("pollIntervalMs".into(), json!(ms));
        }
        error
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: u64) -> Millis {
        Millis::EPOCH.saturating_add(Duration::from_millis(ms))
    }

    fn alice() -> Owner {
        Owner::new("alice")
    }

    #[test]
    fn bucket_allows_the_burst_then_refills_at_the_rate() {
        let limiter = RateLimiter::new(2.0, 3, 10);
        for _ in 0..3 {
            assert!(limiter.check(&alice(), at(0)).is_ok());
        }
        let wait = limiter.check(&alice(), at(0)).expect_err("burst spent");
        assert_eq!(wait, Duration::from_millis(500), "one token at 2/s");
        assert!(
            limiter.check(&Owner::new("bob"), at(0)).is_ok(),
            "principals are independent"
        );
        assert!(limiter.check(&alice(), at(499)).is_err());
        assert!(limiter.check(&alice(), at(500)).is_ok());
        assert!(limiter.check(&alice(), at(500)).is_err());
    }

    fn record(id: &str, args_bytes: usize) -> TaskRecord {
        TaskRecord {
            id: TaskId::from_client(id),
            owner: alice(),
            tool: "t".into(),
            args: json!({"blob": "a".repeat(args_bytes)}),
            status: agentgate_backend::TaskPhase::Working,
            status_message: Some("working".into()),
            job_state: Some(json!({"big": "s".repeat(args_bytes)})),
            input_requests: Default::default(),
            input_responses: Default::default(),
            used_input_keys: Vec::new(),
            cancel_requested: false,
            result: None,
            error: None,
            created_at: at(0),
            updated_at: at(0),
            ttl_ms: None,
            expires_at: None,
            due_at: None,
            lease_owner: None,
            lease_until: None,
            fence: crate::task::Fence::from_raw(0),
            steps: 0,
            failures: 0,
        }
    }

    fn answer(record: &TaskRecord, result_bytes: usize) -> DetailedTask {
        let task = rmcp::model::Task::new(
            record.id.as_str(),
            rmcp::model::TaskStatus::Working,
            "2026-01-01T00:00:00Z".to_owned(),
            "2026-01-01T00:00:00Z".to_owned(),
        );
        let mut detailed = DetailedTask::new(task, rmcp::model::TaskPayload::Working);
        detailed.task.status_message = Some("r".repeat(result_bytes));
        detailed
    }

    #[test]
    fn the_poll_cache_keeps_rendered_answers_within_its_byte_budget() {
        let (_tx, rx) = broadcast::channel(16);
        let cache = PollCache::new(20, 16 * 1024, rx);
        let window = Some(Duration::from_secs(60));
        // The stored record's arguments and checkpoint are not what is kept.
        let big_args = record("t0", 1 << 20);
        let small = answer(&big_args, 10);
        let ticket = match cache.poll(&alice(), &big_args.id, at(0)) {
            Poll::Read(ticket) => ticket,
            other => panic!("first poll reads: {other:?}"),
        };
        cache.remember(&big_args, &small, window, at(0), ticket);
        assert!(cache.bytes() < 1024, "{} bytes kept", cache.bytes());
        assert!(matches!(
            cache.poll(&alice(), &big_args.id, at(1)),
            Poll::Cached(_)
        ));
        // Answers over a sixteenth of the budget are not kept at all.
        let huge = record("t1", 0);
        let ticket = match cache.poll(&alice(), &huge.id, at(0)) {
            Poll::Read(ticket) => ticket,
            other => panic!("{other:?}"),
        };
        cache.remember(&huge, &answer(&huge, 2048), window, at(0), ticket);
        assert!(matches!(
            cache.poll(&alice(), &huge.id, at(1)),
            Poll::Read(_)
        ));
        // Many answers: the oldest reads make room, the total stays in budget.
        for n in 0..200u64 {
            let r = record(&format!("m{n}"), 0);
            let ticket = match cache.poll(&alice(), &r.id, at(n)) {
                Poll::Read(ticket) => ticket,
                other => panic!("{other:?}"),
            };
            cache.remember(&r, &answer(&r, 500), window, at(n), ticket);
            assert!(cache.bytes() <= 16 * 1024, "{} bytes", cache.bytes());
        }
        assert!(cache.len() < 200, "older answers were dropped");
        assert!(matches!(
            cache.poll(&alice(), &TaskId::from_client("m199"), at(200)),
            Poll::Cached(_)
        ));
        assert!(matches!(
            cache.poll(&alice(), &TaskId::from_client("m0"), at(200)),
            Poll::Read(_)
        ));
    }

    #[test]
    fn a_listen_costs_a_request_per_task_and_open_listens_are_capped() {
        let (_tx, rx) = broadcast::channel(16);
        let limits = Limits {
            requests_per_second: 10.0,
            request_burst: 100,
            max_listens: 2,
            ..Limits::default()
        };
        let guard = Guard::new(limits, rx);
        let too_many = guard
            .open_listen(&alice(), 101, at(0))
            .expect_err("over the burst");
        assert!(
            too_many.message.contains("limits.request_burst"),
            "{too_many:?}"
        );
        let first = guard.open_listen(&alice(), 60, at(0)).expect("60 of 100");
        let spent = guard
            .open_listen(&alice(), 60, at(0))
            .expect_err("40 tokens left");
        assert!(spent.message.contains("costs 60 requests"), "{spent:?}");
        let second = guard.open_listen(&alice(), 1, at(0)).expect("one more");
        let capped = guard
            .open_listen(&alice(), 1, at(0))
            .expect_err("two open already");
        assert!(capped.message.contains("limits.max_listens"), "{capped:?}");
        assert!(
            guard.open_listen(&Owner::new("bob"), 1, at(0)).is_ok(),
            "principals are apart"
        );
        drop(first);
        let third = guard
            .open_listen(&alice(), 1, at(0))
            .expect("a slot was freed");
        drop((second, third));
        assert!(guard.listens.lock().expect("lock").get(&alice()).is_none());
    }

    #[test]
    fn tracked_principals_stay_bounded() {
        let limiter = RateLimiter::new(1.0, 5, 3);
        for n in 0..100u64 {
            assert!(limiter.check(&Owner::new(format!("p{n}")), at(n)).is_ok());
            assert!(limiter.tracked() <= 3, "{} tracked", limiter.tracked());
        }
        // A principal mid-burst is kept over a refilled one.
        let limiter = RateLimiter::new(1.0, 2, 2);
        for _ in 0..2 {
            assert!(limiter.check(&alice(), at(0)).is_ok());
        }
        assert!(limiter.check(&Owner::new("idle"), at(0)).is_ok());
        // 1.5 s later `idle` has refilled and alice has not.
        assert!(limiter.check(&Owner::new("new"), at(1_500)).is_ok());
        assert!(
            limiter.check(&alice(), at(1_500)).is_ok(),
            "1.5 tokens refilled"
        );
        assert!(
            limiter.check(&alice(), at(1_500)).is_err(),
            "alice's spent bucket was kept, not reset"
        );
    }
}
