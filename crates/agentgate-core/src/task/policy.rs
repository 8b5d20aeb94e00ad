use std::time::Duration;

use super::TaskStatus;

/// How often a client should poll a task, per state, growing for long work.
///
/// `tasks/get` is the hot path: the interval starts short so quick jobs feel
/// instant, then doubles every `grow_every` of task age up to `max`, so an
/// agent that works for an hour is not polled 3,600 times.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PollPolicy {
    pub working: Duration,
    pub input_required: Duration,
    pub grow_every: Option<Duration>,
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

    /// The interval to suggest for a task in `status` that is `age` old.
    /// Terminal tasks get no suggestion: there is nothing left to poll for.
    pub fn interval(&self, status: TaskStatus, age: Duration) -> Option<Duration> {
        let base = match status {
            TaskStatus::Working => self.working,
            TaskStatus::InputRequired => self.input_required,
            _ => return None,
        };
        let Some(grow_every) = self.grow_every.filter(|g| !g.is_zero()) else {
            return Some(base);
        };
        let doublings = (age.as_millis() / grow_every.as_millis()).min(16) as u32;
        Some(base.saturating_mul(1 << doublings).min(self.max.max(base)))
    }
}

/// Per-tool task policy: lifetime, polling, budgets and timeouts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolPolicy {
    /// How long the task handle lives after creation; `None` keeps it until the
    /// retention sweep removes it after it ends. A task still running when its
    /// TTL passes is marked `failed` and its id answers as unknown.
    pub ttl: Option<Duration>,
    pub poll: PollPolicy,
    /// How long a client *without* the tasks extension is kept waiting inline
    /// before it gets a "still running" result carrying the task id.
    pub sync_budget: Duration,
    /// Upper bound for one step of the job.
    pub step_timeout: Duration,
    /// Whether clients without the tasks extension may call the tool at all.
    /// When false they get `-32021` naming the extension.
    pub sync_fallback: bool,
}

impl Default for ToolPolicy {
    fn default() -> Self {
        Self {
            ttl: Some(Duration::from_secs(24 * 3600)),
            poll: PollPolicy::default(),
            sync_budget: Duration::from_secs(60),
            step_timeout: Duration::from_secs(120),
            sync_fallback: true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn poll_interval_grows_with_age_and_is_capped() {
        let p = PollPolicy {
            working: Duration::from_secs(1),
            input_required: Duration::from_secs(5),
            grow_every: Some(Duration::from_secs(60)),
            max: Duration::from_secs(8),
        };
        let at = |s| p.interval(TaskStatus::Working, Duration::from_secs(s));
        assert_eq!(at(0), Some(Duration::from_secs(1)));
        assert_eq!(at(61), Some(Duration::from_secs(2)));
        assert_eq!(at(130), Some(Duration::from_secs(4)));
        assert_eq!(at(100_000), Some(Duration::from_secs(8)));
        assert_eq!(
            p.interval(TaskStatus::InputRequired, Duration::ZERO),
            Some(Duration::from_secs(5))
        );
        assert_eq!(p.interval(TaskStatus::Completed, Duration::ZERO), None);
    }
}
