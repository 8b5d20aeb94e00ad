//! Per-tool policies: a task's lifetime, how often clients poll it, how
//! long a client without the tasks extension waits inline, and how failed
//! steps are retried. Built with builder methods over the defaults:
//!
//! ```
//! use std::time::Duration;
//! use agentgate_backend::{PollPolicy, RetryPolicy, ToolPolicy};
//!
//! let policy = ToolPolicy::default()
//!     .ttl(Some(Duration::from_secs(3600)))
//!     .poll(PollPolicy::fixed(Duration::from_secs(2)))
//!     .sync_budget(Duration::from_secs(10))
//!     .retry(RetryPolicy::default().max_backoff(Duration::from_secs(60)));
//! assert_eq!(policy.retry.backoff(1), Duration::from_secs(1));
//! assert_eq!(policy.retry.backoff(10), Duration::from_secs(60));
//! ```

use std::time::Duration;

use crate::TaskPhase;

/// How often a client should poll a task, per state, growing for long work.
///
/// `tasks/get` is the hot path: the interval starts short so quick jobs feel
/// instant, then doubles every `grow_every` of task age up to `max`, so an
/// agent that works for an hour is not polled 3,600 times.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PollPolicy {
    /// The interval for a young `working` task.
    pub working: Duration,
    /// The interval while the task waits for input (a person answers).
    pub input_required: Duration,
    /// Double the interval every this much task age; `None` never grows it.
    pub grow_every: Option<Duration>,
    /// The longest interval.
    pub max: Duration,
}

impl Default for PollPolicy {
    fn default() -> Self {
        Self {
            working: Duration::from_millis(500),
            input_required: Duration::from_secs(2),
            grow_every: Some(Duration::from_secs(60)),
            max: Duration::from_secs(30),
        }
    }
}

impl PollPolicy {
    /// A fixed interval, whatever the state and age.
    pub fn fixed(interval: Duration) -> Self {
        Self {
            working: interval,
            input_required: interval,
            grow_every: None,
            max: interval,
        }
    }

    /// The interval for a working task (before it grows with age).
    pub fn working(mut self, interval: Duration) -> Self {
        self.working = interval;
        self
    }

    /// The interval for a task waiting for input.
    pub fn input_required(mut self, interval: Duration) -> Self {
        self.input_required = interval;
        self
    }

    /// Doubles the interval every `every` of task age (`None`: never).
    pub fn grow_every(mut self, every: Option<Duration>) -> Self {
        self.grow_every = every;
        self
    }

    /// The longest interval growth reaches.
    pub fn max(mut self, max: Duration) -> Self {
        self.max = max;
        self
    }

    /// The interval to suggest for a task in `status` that is `age` old.
    /// Terminal tasks get no suggestion: there is nothing left to poll for.
    pub fn interval(&self, status: TaskPhase, age: Duration) -> Option<Duration> {
        let base = match status {
            TaskPhase::Working => self.working,
            TaskPhase::InputRequired => self.input_required,
            _ => return None,
        };
        let Some(grow_every) = self.grow_every.filter(|g| !g.is_zero()) else {
            return Some(base);
        };
        let doublings =
            u32::try_from((age.as_millis() / grow_every.as_millis()).min(16)).unwrap_or(16);
        Some(base.saturating_mul(1 << doublings).min(self.max.max(base)))
    }
}

/// Per-tool task policy: lifetime, polling, budgets, timeouts and retries.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ToolPolicy {
    /// How long the task handle lives after the task's last progress (its
    /// creation, a step that got somewhere, an answer, its end); `None` keeps
    /// it until the retention sweep removes it after it ends. A live task
    /// that makes no progress for this long expires: its id answers as
    /// unknown and the job's [`cancel`](crate::Job::cancel) runs, so the
    /// upstream work stops.
    pub ttl: Option<Duration>,
    /// The `pollIntervalMs` clients are told.
    pub poll: PollPolicy,
    /// How long a client *without* the tasks extension is kept waiting inline
    /// before it gets a "still running" result carrying the task id.
    pub sync_budget: Duration,
    /// Upper bound for one step of the job.
    pub step_timeout: Duration,
    /// Whether clients without the tasks extension may call the tool at all.
    /// When false they get `-32021` naming the extension.
    pub sync_fallback: bool,
    /// How a step that failed retryably is tried again.
    pub retry: RetryPolicy,
}

impl Default for ToolPolicy {
    fn default() -> Self {
        Self {
            ttl: Some(Duration::from_secs(24 * 3600)),
            poll: PollPolicy::default(),
            sync_budget: Duration::from_secs(60),
            step_timeout: Duration::from_secs(120),
            sync_fallback: true,
            retry: RetryPolicy::default(),
        }
    }
}

impl ToolPolicy {
    /// How long a task handle lives after the task's last progress (`None`:
    /// until the retention sweep removes it after it ends); see
    /// the `ttl` field.
    pub fn ttl(mut self, ttl: Option<Duration>) -> Self {
        self.ttl = ttl;
        self
    }

    /// How often clients are told to poll.
    pub fn poll(mut self, poll: PollPolicy) -> Self {
        self.poll = poll;
        self
    }

    /// How long a client without the tasks extension waits inline.
    pub fn sync_budget(mut self, budget: Duration) -> Self {
        self.sync_budget = budget;
        self
    }

    /// Upper bound for one step of the job.
    pub fn step_timeout(mut self, timeout: Duration) -> Self {
        self.step_timeout = timeout;
        self
    }

    /// Whether clients without the tasks extension may call the tool.
    pub fn sync_fallback(mut self, allowed: bool) -> Self {
        self.sync_fallback = allowed;
        self
    }

    /// How failed steps are retried.
    pub fn retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }
}

/// How a step that failed retryably ([`JobError::Retryable`]) is tried
/// again: after a backoff that starts at `first_backoff` and doubles up to
/// `max_backoff` (an upstream's `retry_after` can make it longer), until
/// `retry_for` of backoff has been scheduled or `max_failures` failures in a
/// row, whichever comes first. `None` takes the engine's setting
/// (`[engine] retry_for_seconds`, and its hard cap of failures).
///
/// [`JobError::Retryable`]: crate::JobError::Retryable
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RetryPolicy {
    /// The wait after the first failure.
    pub first_backoff: Duration,
    /// The longest wait between two tries.
    pub max_backoff: Duration,
    /// Give up once this much backoff has been scheduled (`None`: the
    /// engine's `retry_for`).
    pub retry_for: Option<Duration>,
    /// Give up after this many failures in a row (`None`: the engine's cap).
    pub max_failures: Option<u32>,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            first_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(300),
            retry_for: None,
            max_failures: None,
        }
    }
}

impl RetryPolicy {
    /// The first wait.
    pub fn first_backoff(mut self, wait: Duration) -> Self {
        self.first_backoff = wait;
        self
    }

    /// The longest wait doubling reaches.
    pub fn max_backoff(mut self, wait: Duration) -> Self {
        self.max_backoff = wait;
        self
    }

    /// How much backoff may be scheduled before the task fails.
    pub fn retry_for(mut self, total: Option<Duration>) -> Self {
        self.retry_for = total;
        self
    }

    /// Failures in a row after which the task fails.
    pub fn max_failures(mut self, failures: Option<u32>) -> Self {
        self.max_failures = failures;
        self
    }

    /// The wait after the `failures`-th failure in a row (1-based).
    pub fn backoff(&self, failures: u32) -> Duration {
        let doublings = failures.saturating_sub(1).min(30);
        self.first_backoff
            .saturating_mul(1 << doublings)
            .min(self.max_backoff.max(self.first_backoff))
    }

    /// The waits after the first `failures` failures, added up.
    pub fn scheduled(&self, failures: u32) -> Duration {
        (1..=failures)
            .map(|n| self.backoff(n))
            .fold(Duration::ZERO, Duration::saturating_add)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn poll_interval_grows_with_age_and_is_capped() {
        let p = PollPolicy::default()
            .working(Duration::from_secs(1))
            .input_required(Duration::from_secs(5))
            .grow_every(Some(Duration::from_secs(60)))
            .max(Duration::from_secs(8));
        let at = |s| p.interval(TaskPhase::Working, Duration::from_secs(s));
        assert_eq!(at(0), Some(Duration::from_secs(1)));
        assert_eq!(at(61), Some(Duration::from_secs(2)));
        assert_eq!(at(130), Some(Duration::from_secs(4)));
        assert_eq!(at(100_000), Some(Duration::from_secs(8)));
        assert_eq!(
            p.interval(TaskPhase::InputRequired, Duration::ZERO),
            Some(Duration::from_secs(5))
        );
        assert_eq!(p.interval(TaskPhase::Completed, Duration::ZERO), None);
    }

    #[test]
    fn backoff_doubles_from_the_first_wait_up_to_the_cap_and_saturates() {
        let r = RetryPolicy::default();
        let secs = |n| r.backoff(n).as_secs();
        assert_eq!(
            [secs(1), secs(2), secs(3), secs(9), secs(10)],
            [1, 2, 4, 256, 300]
        );
        assert_eq!(secs(u32::MAX), 300, "no overflow for absurd counts");
        assert_eq!(r.scheduled(3), Duration::from_secs(7));
        let quick = RetryPolicy::default()
            .first_backoff(Duration::from_millis(100))
            .max_backoff(Duration::from_secs(1));
        assert_eq!(quick.backoff(1), Duration::from_millis(100));
        assert_eq!(quick.backoff(5), Duration::from_secs(1));
        let huge = RetryPolicy::default().max_backoff(Duration::MAX);
        assert_eq!(huge.backoff(u32::MAX), Duration::from_secs(1 << 30));
        let absurd = RetryPolicy::default()
            .first_backoff(Duration::MAX / 2)
            .max_backoff(Duration::MAX);
        assert_eq!(absurd.backoff(3), Duration::MAX, "the doubling saturates");
        assert_eq!(absurd.scheduled(3), Duration::MAX, "the sum saturates");
    }
}
