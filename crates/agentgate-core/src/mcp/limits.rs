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
//! - **Request rate**: a token bucket per principal ([`RateLimiter`]),
//!   refilling [`Limits::requests_per_second`] up to [`Limits::request_burst`]
//!   tokens, charged for `tools/call`, `tools/list` and every `tasks/*`
//!   request. Memory is bounded: at most [`Limits::max_principals`] buckets
//!   are kept; a bucket that has refilled is indistinguishable from a new one
//!   and is dropped first, then the longest-idle one. Per instance: with
//!   several instances behind a balancer the effective rate is up to N times
//!   the setting.
//! - **Fast `tasks/get` polling** ([`PollCache`]): the answer read from the
//!   store is kept per task for the `pollIntervalMs` it advertised; a poll
//!   within that window is answered from memory (re-rendered at the current
//!   time) unless the task changed meanwhile (the engine's change notices,
//!   which include other instances' changes on PostgreSQL, drop the entry).
//!   More than [`Limits::poll_burst`] polls of one task within one interval
//!   are refused, telling the client the interval to use. Ended tasks have no
//!   interval; their answer is kept for [`TERMINAL_WINDOW`], never refused.
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
use std::sync::Mutex;
use std::time::Duration;

use rmcp::model::ErrorData;
use serde_json::json;
use tokio::sync::broadcast::{self, error::TryRecvError};

use super::error::GatewayError;
use crate::clock::Millis;
use crate::task::{Owner, TaskId, TaskRecord};

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

/// The refusal for `inputResponses` over the cap.
pub(crate) fn input_too_large(size: usize, limit: usize) -> ErrorData {
    ErrorData::invalid_params(
        format!(
            "field `inputResponses` is {size} bytes of JSON, over the {limit}-byte limit \
             (limits.max_input_response_bytes); send smaller answers, or fewer keys per request \
             (partial answers are allowed)"
        ),
        Some(json!({ "field": "inputResponses", "size": size, "limit": limit })),
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
        if self.rate <= 0.0 {
            return Ok(());
        }
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
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            Ok(())
        } else {
            let wait = (1.0 - bucket.tokens) / self.rate;
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
    record: TaskRecord,
    read_at: Millis,
    window: Duration,
    advertised: bool,
    polls: u32,
}

/// What the poll cache says about a `tasks/get`.
#[derive(Debug)]
pub enum Poll {
    /// Within the window of the last store read: this answer, from memory.
    Cached(Box<TaskRecord>),
    /// Polled more than the burst within one advertised interval.
    TooFast { interval: Duration, polls: u32 },
    /// Read the store, then [`PollCache::remember`] the answer with this
    /// ticket.
    Read(Ticket),
}

/// Taken before a store read, so [`PollCache::remember`] can tell whether
/// the task changed while it was read.
#[derive(Debug, Clone, Copy)]
pub struct Ticket(u64);

#[derive(Debug)]
struct CacheState {
    entries: HashMap<TaskId, Entry>,
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
    /// Drops the entries of tasks that changed since the last call.
    fn forget_changed(&mut self) {
        loop {
            match self.changes.try_recv() {
                Ok(id) => {
                    self.seen += 1;
                    self.entries.remove(&id);
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
                    self.entries.clear();
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
    state: Mutex<CacheState>,
}

impl PollCache {
    /// `changes` is the engine's change feed, subscribed before any read.
    pub fn new(poll_burst: u32, changes: broadcast::Receiver<TaskId>) -> Self {
        Self {
            burst: poll_burst,
            state: Mutex::new(CacheState {
                entries: HashMap::new(),
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
    pub fn poll(&self, owner: &Owner, id: &TaskId, now: Millis) -> Poll {
        let mut state = self.state();
        state.forget_changed();
        let ticket = Ticket(state.seen);
        let Some(entry) = state.entries.get_mut(id) else {
            return Poll::Read(ticket);
        };
        // Another owner's poll of this id is a plain miss: the store answers
        // it as unknown, and the owner's entry is left alone.
        if &entry.record.owner != owner {
            return Poll::Read(ticket);
        }
        if now >= entry.read_at.saturating_add(entry.window)
            || now < entry.read_at
            || entry.record.is_expired(now)
        {
            state.entries.remove(id);
            return Poll::Read(ticket);
        }
        entry.polls = entry.polls.saturating_add(1);
        if entry.advertised && self.burst > 0 && entry.polls > self.burst {
            return Poll::TooFast {
                interval: entry.window,
                polls: entry.polls,
            };
        }
        Poll::Cached(Box::new(entry.record.clone()))
    }

    /// Keeps a record read from the store at `now`, for the interval it
    /// advertises (`None` for an ended task), unless the task changed since
    /// `ticket` was taken (the read may predate the change).
    pub fn remember(
        &self,
        record: &TaskRecord,
        interval: Option<Duration>,
        now: Millis,
        ticket: Ticket,
    ) {
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
        if state.entries.len() >= MAX_CACHED_TASKS && !state.entries.contains_key(&record.id) {
            state
                .entries
                .retain(|_, e| now < e.read_at.saturating_add(e.window));
            if state.entries.len() >= MAX_CACHED_TASKS {
                state.entries.clear();
            }
        }
        let window = interval.unwrap_or(TERMINAL_WINDOW);
        state.entries.insert(
            record.id.clone(),
            Entry {
                record: record.clone(),
                read_at: now,
                window,
                advertised: interval.is_some(),
                polls: 1,
            },
        );
    }
}

/// A gateway's limits with their state.
#[derive(Debug)]
pub(crate) struct Guard {
    pub limits: Limits,
    pub rate: RateLimiter,
    pub polls: PollCache,
}

impl Guard {
    pub(crate) fn new(limits: Limits, changes: broadcast::Receiver<TaskId>) -> Self {
        Self {
            rate: RateLimiter::new(
                limits.requests_per_second,
                limits.request_burst,
                limits.max_principals,
            ),
            polls: PollCache::new(limits.poll_burst, changes),
            limits,
        }
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

    /// The refusal for polling one task too fast.
    pub(crate) fn too_fast(&self, id: &TaskId, interval: Duration, polls: u32) -> ErrorData {
        let ms = agentgate_backend::time::wire_ms(interval);
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
