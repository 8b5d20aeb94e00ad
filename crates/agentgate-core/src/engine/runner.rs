//! One step of one task: pick the input, run the job under a timeout while
//! heartbeating the lease, and checkpoint what it produced.

use std::time::Duration;

use agentgate_backend::engine::Input;
use agentgate_backend::{Event, JobContext, JobError, Millis, RetryPolicy, Step};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::Engine;

/// How long a task of a tool not listed yet waits before it looks again.
const TOOL_PENDING_RETRY: Duration = Duration::from_secs(5);
/// How the status of a task waiting for its tool begins.
const TOOL_PENDING: &str = "waiting for tool ";
use crate::job::engine_failure;
use crate::store::StoreError;
use crate::task::{Outcome, TaskRecord};

impl Engine {
    pub(super) async fn run_step(self, task: TaskRecord, interrupt: CancellationToken) {
        // Wall time, not the engine's clock: tests move that one by hand.
        let started = std::time::Instant::now();
        let outcome = self.step_outcome(&task, &interrupt).await;
        self.inner.metrics.observe_step(
            &task.tool,
            outcome.as_ref().map_or("lease_lost", outcome_label),
            started.elapsed(),
        );
        self.running().remove(&task.id);
        let Some(outcome) = outcome else { return };
        let outcome = self.within_limit(outcome);
        match self.save(&task, outcome).await {
            Save::Done => {}
            Save::Unavailable => self.release(&task).await,
            Save::Refused(reason) => {
                // Saving the same outcome again would be refused again, and
                // running the step again would redo its upstream side
                // effect only to be refused once more: the task fails,
                // with an error short and plain enough to be stored.
                let failed = Outcome::Failed {
                    error: engine_failure(format!(
                        "the step's result could not be stored: {reason}"
                    )),
                };
                match self.save(&task, failed).await {
                    Save::Done => {}
                    Save::Unavailable => self.release(&task).await,
                    Save::Refused(again) => {
                        // Not released: the lease runs out by itself, so
                        // the step runs again at most once per lease (and
                        // not past the task's TTL), never in a tight loop.
                        tracing::error!(task = %task.id, error = %again,
                            "even the task's failure could not be stored; the lease runs out by itself");
                    }
                }
            }
        }
    }

    /// The outcome, or a failure naming [`EngineConfig::max_result_bytes`]
    /// if it would store more than that.
    ///
    /// [`EngineConfig::max_result_bytes`]: super::EngineConfig::max_result_bytes
    fn within_limit(&self, outcome: Outcome) -> Outcome {
        let limit = self.inner.config.max_result_bytes;
        let size = stored_bytes(&outcome);
        if size <= limit {
            return outcome;
        }
        Outcome::Failed {
            error: engine_failure(format!(
                "the step's result is {size} bytes, over the gateway's limit of {limit} \
                     bytes (engine.max_result_bytes)"
            )),
        }
    }

    /// Checkpoints a step's outcome. A store that fails the write (a
    /// database blip, a full disk) is asked again, quickly at first, for up
    /// to a third of the lease, so a short outage delays the task by about
    /// its own length rather than by the lease. If it is still unavailable,
    /// the caller gives the lease up at once, so another attempt (here or on
    /// another instance) runs the step again as soon as the store is back;
    /// if even that fails, the lease runs out by itself. A write refused for
    /// any other reason is not retried: the caller fails the task.
    async fn save(&self, task: &TaskRecord, outcome: Outcome) -> Save {
        let worker = &self.inner.config.worker_id;
        let give_up = self
            .inner
            .clock
            .now()
            .saturating_add(self.inner.config.lease / 3);
        let mut pause = SAVE_RETRY_FIRST;
        let mut failed = false;
        loop {
            let now = self.inner.clock.now();
            match self
                .inner
                .store
                .checkpoint(&task.id, worker, task.fence, outcome.clone(), now)
                .await
            {
                Ok(saved) => {
                    if failed {
                        tracing::info!(task = %task.id, "step saved after the store recovered");
                    }
                    tracing::debug!(task = %task.id, status = %saved.status, "step saved");
                    if saved.status.is_terminal() {
                        // The operator's one line per task end (created is
                        // logged by the task service).
                        tracing::info!(
                            task = %task.id,
                            tool = %task.tool,
                            outcome = %saved.status,
                            is_error = saved.result.as_ref().is_some_and(|r| r["isError"] == true),
                            duration_ms = u64::try_from(now.since(saved.created_at).as_millis()).unwrap_or(u64::MAX),
                            "task ended"
                        );
                    }
                    self.publish(&task.id);
                    if saved.due_at.is_some_and(|due| due <= now) {
                        self.wake();
                    }
                    return Save::Done;
                }
                Err(StoreError::LeaseLost { .. }) if failed => {
                    // An earlier try may have committed with its answer lost;
                    // either way the task is no longer ours: let waiters look.
                    tracing::warn!(task = %task.id, "lease gone after a failed save");
                    self.publish(&task.id);
                    return Save::Done;
                }
                Err(StoreError::LeaseLost { .. }) => {
                    tracing::warn!(task = %task.id, "lease lost during the step; its result was discarded");
                    return Save::Done;
                }
                Err(StoreError::NotFound) => {
                    // Expired and swept while the step ran: there is no task
                    // to save to, and waiters should see it gone.
                    tracing::info!(task = %task.id, "task was deleted during its step; its result was discarded");
                    self.publish(&task.id);
                    return Save::Done;
                }
                Err(e) if e.outage().is_some() && now.saturating_add(pause) < give_up => {
                    if !failed {
                        tracing::warn!(task = %task.id, error = %e, "saving a step failed; retrying");
                    }
                    failed = true;
                    self.inner.clock.sleep(pause).await;
                    pause = (pause * 2).min(SAVE_RETRY_MAX);
                }
                Err(e) if e.outage().is_some() => {
                    tracing::error!(task = %task.id, error = %e, "saving a step failed; releasing its lease");
                    return Save::Unavailable;
                }
                Err(e) => {
                    tracing::error!(task = %task.id, error = %e, "the store refused a step's result; failing the task");
                    return Save::Refused(e);
                }
            }
        }
    }

    /// Gives up `task`'s lease so its step runs again without waiting for the
    /// lease to run out.
    pub(super) async fn release(&self, task: &TaskRecord) {
        let now = self.inner.clock.now();
        match self
            .inner
            .store
            .release(&task.id, &self.inner.config.worker_id, task.fence, now)
            .await
        {
            Ok(()) => {
                self.publish(&task.id);
                self.wake();
            }
            Err(StoreError::LeaseLost { .. }) => {}
            Err(e) => {
                tracing::warn!(task = %task.id, error = %e, "releasing the lease failed; it runs out by itself");
            }
        }
    }

    /// Runs the step; `None` means the lease was lost and nothing may be saved.
    async fn step_outcome(
        &self,
        task: &TaskRecord,
        interrupt: &CancellationToken,
    ) -> Option<Outcome> {
        let now = self.inner.clock.now();
        let tools = self.tools();
        let Some(spec) = tools.get(&task.tool) else {
            if task.cancel_requested {
                return Some(Outcome::cancelled());
            }
            // A backend has not listed all its tools yet (an upstream not
            // reached since start), or this tool was served here before:
            // it may come back, so the task waits for it (each look
            // counted as a failure in a row), for at most the engine's
            // `retry_for`, instead of failing at once.
            let waited =
                TOOL_PENDING_RETRY.saturating_mul(u32::try_from(task.failures).unwrap_or(u32::MAX));
            let may_come_back = tools.may_come_back(&task.tool);
            if may_come_back && waited < self.inner.config.retry_for {
                let why = if tools.pending() {
                    "its server has not listed its tools since this instance started"
                } else {
                    "its server no longer lists it"
                };
                return Some(Outcome::Retry {
                    status_message: Some(format!("{TOOL_PENDING}`{}`: {why}", task.tool)),
                    due_at: now.saturating_add(TOOL_PENDING_RETRY),
                });
            }
            if may_come_back {
                return Some(Outcome::Failed {
                    error: engine_failure(format!(
                        "tool `{}` is not served by this instance: it has not been listed for {}s",
                        task.tool,
                        waited.as_secs()
                    )),
                });
            }
            return Some(Outcome::Failed {
                error: engine_failure(format!(
                    "tool `{}` is not served by this instance",
                    task.tool
                )),
            });
        };
        // Looks for a tool not listed yet are no failures of its job.
        let waited_for_tool;
        let task = if task.failures > 0
            && task
                .status_message
                .as_deref()
                .is_some_and(|m| m.starts_with(TOOL_PENDING))
        {
            waited_for_tool = TaskRecord {
                failures: 0,
                ..task.clone()
            };
            &waited_for_tool
        } else {
            task
        };
        let input = match (&task.job_state, task.cancel_requested) {
            (None, true) => return Some(Outcome::cancelled()),
            (Some(state), true) => Input::Cancel(state.clone()),
            (None, false) => Input::Start(task.args.clone()),
            (Some(state), false) => {
                let event = if task.input_requests.is_empty() && !task.input_responses.is_empty() {
                    Event::Input(task.input_responses.clone())
                } else {
                    Event::Tick
                };
                Input::Resume(state.clone(), event)
            }
        };
        let cx = JobContext::new(task.id.clone(), task.owner.clone(), task.steps, now)
            .with_upstream_ids(std::sync::Arc::clone(&self.inner.upstream_ids));
        let timeout = spec.policy.step_timeout;
        let result = tokio::select! {
            result = crate::clock::timeout(&*self.inner.clock, timeout, spec.step(input, &cx)) => result,
            () = self.heartbeat(task) => return None,
            () = interrupt.cancelled() => return Some(Outcome::Interrupted),
        };
        let now = self.inner.clock.now();
        Some(match result {
            None => self.retry_or_fail(
                task,
                &spec.policy.retry,
                format!("the step did not finish within {}s", timeout.as_secs()),
                None,
                now,
            ),
            Some(Err(JobError::Retryable {
                message,
                retry_after,
            })) => self.retry_or_fail(task, &spec.policy.retry, message, retry_after, now),
            Some(Err(JobError::Fatal(error))) => Outcome::Failed {
                error: to_json(&error),
            },
            // A kind of failure this engine does not know (a newer SDK):
            // failing the task says so, where retrying might never end.
            Some(Err(other)) => Outcome::Failed {
                error: engine_failure(other.to_string()),
            },
            Some(Ok(step)) => into_outcome(step, now),
        })
    }

    /// The outcome of a retryable failure under the tool's `retry` policy
    /// (the engine's `retry_for` and `max_retries` where it sets none, and
    /// `max_retries` as a hard cap either way). Counts failures in a row
    /// (`task.failures`), never the lease's fencing token (`task.fence`).
    fn retry_or_fail(
        &self,
        task: &TaskRecord,
        retry: &RetryPolicy,
        message: String,
        retry_after: Option<Duration>,
        now: Millis,
    ) -> Outcome {
        let failures = u32::try_from(task.failures.saturating_add(1)).unwrap_or(u32::MAX);
        let config = &self.inner.config;
        let max_failures = retry
            .max_failures
            .map_or(config.max_retries, i64::from)
            .min(config.max_retries);
        let retry_for = retry.retry_for.unwrap_or(config.retry_for);
        let retry = &retry
            .clone()
            .max_backoff(retry.max_backoff.min(config.max_backoff));
        // Time-based budget: an outage shorter than `retry_for` must not
        // fail tasks; the failure count is only a backstop.
        let retried_for = retry.scheduled(failures - 1);
        if i64::from(failures) >= max_failures || retried_for >= retry_for {
            return Outcome::Failed {
                error: engine_failure(format!(
                    "gave up after {failures} attempts over at least {}s: {message}",
                    retried_for.as_secs()
                )),
            };
        }
        // Upstream's Retry-After wins when it asks for longer.
        let backoff = retry.backoff(failures).max(retry_after.unwrap_or_default());
        let due_at = now.saturating_add(backoff);
        tracing::warn!(task = %task.id, failures, error = %message, "step failed; will retry");
        Outcome::Retry {
            status_message: Some(format!(
                "retrying after an upstream problem ({message}); attempt {} at {} (in {}s); \
                 giving up after {}s of retries",
                failures.saturating_add(1),
                crate::clock::iso8601(due_at),
                backoff.as_secs(),
                retry_for.as_secs()
            )),
            due_at,
        }
    }

    /// Extends the lease every third of its length; returns when the step
    /// must be abandoned: the lease was taken over, or it could not be
    /// renewed and is about to run out.
    ///
    /// Self-fencing: once the store stops answering heartbeats, another
    /// instance may claim the task as soon as the lease ends. So the step is
    /// stopped [`fence_margin`] before the end of the lease the last
    /// successful heartbeat (or the claim) secured, counted from when that
    /// request was sent, so that one step never runs in two places. A
    /// failed heartbeat is tried again sooner than a third of the lease.
    async fn heartbeat(&self, task: &TaskRecord) {
        let clock = &*self.inner.clock;
        let lease = self.inner.config.lease;
        let margin = fence_margin(lease);
        // The lease from the claim (or `create_claimed`), on this engine's
        // clock: it was taken before the step started, so it ends no later
        // than a lease from now, and earlier if the step waited to start.
        let mut held_until = clock.now().saturating_add(lease);
        if let Some(until) = task.lease_until {
            held_until = held_until.min(until);
        }
        let mut failing = false;
        loop {
            let stop_at = held_until.saturating_sub(margin);
            let pause = if failing { lease / 10 } else { lease / 3 };
            let beat_at = clock.now().saturating_add(pause).min(stop_at);
            clock.sleep_until(beat_at).await;
            let sent = clock.now();
            if sent >= stop_at {
                tracing::error!(task = %task.id, "the lease could not be renewed; stopping the step before it runs out");
                return;
            }
            let beat = self.inner.store.heartbeat(
                &task.id,
                &self.inner.config.worker_id,
                task.fence,
                lease,
                sent,
            );
            // A heartbeat that hangs past the deadline must not keep the
            // step running either.
            let answer = tokio::select! {
                answer = beat => answer,
                () = clock.sleep_until(stop_at) => continue,
            };
            match answer {
                Ok(()) => {
                    if failing {
                        tracing::info!(task = %task.id, "heartbeats work again");
                    }
                    failing = false;
                    held_until = sent.saturating_add(lease);
                }
                Err(StoreError::LeaseLost { .. }) => {
                    tracing::warn!(task = %task.id, "lease taken over; abandoning the step");
                    return;
                }
                Err(e) => {
                    tracing::warn!(task = %task.id, error = %e, "heartbeat failed; retrying");
                    failing = true;
                }
            }
        }
    }
}

/// How long before its lease ends a step whose lease could not be renewed
/// is stopped: a tenth of the lease (3 s of the default 30 s), at least
/// 100 ms, to cover the time the step takes to stop and a slow heartbeat
/// answer.
fn fence_margin(lease: Duration) -> Duration {
    (lease / 10).max(Duration::from_millis(100)).min(lease / 2)
}

/// How [`Engine::save`] ended.
enum Save {
    /// Saved, or nothing left to save (the lease or the task is gone).
    Done,
    /// The store is unavailable (an outage): the step may run again once it
    /// is back.
    Unavailable,
    /// The store refused this outcome for another reason (a value the
    /// database cannot hold, a row it cannot decode): saving it again would
    /// fail again.
    Refused(StoreError),
}

/// Bytes of JSON (and text) `outcome` would store, counted without
/// building the JSON.
fn stored_bytes(outcome: &Outcome) -> usize {
    /// An `io::Write` that only counts.
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 = self.0.saturating_add(bytes.len());
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    fn json(value: &impl serde::Serialize) -> usize {
        let mut count = Count(0);
        // Serialising a JSON value cannot fail; the count so far is kept.
        let _ = serde_json::to_writer(&mut count, value);
        count.0
    }
    let text = |text: &Option<String>| text.as_ref().map_or(0, String::len);
    match outcome {
        Outcome::Completed { result } => json(result),
        Outcome::Failed { error } => json(error),
        Outcome::Waiting {
            state,
            status_message,
            ..
        } => json(state).saturating_add(text(status_message)),
        Outcome::InputRequired {
            state,
            status_message,
            requests,
        } => json(state)
            .saturating_add(text(status_message))
            .saturating_add(json(requests)),
        Outcome::Retry { status_message, .. } => text(status_message),
        Outcome::Cancelled { .. } | Outcome::Interrupted => 0,
    }
}

/// The first pause before saving a step again after the store failed it.
const SAVE_RETRY_FIRST: Duration = Duration::from_millis(50);
/// The longest pause between tries to save a step.
const SAVE_RETRY_MAX: Duration = Duration::from_secs(2);

/// The `outcome` label of a step in `agentgate_step_duration_seconds`.
fn outcome_label(outcome: &Outcome) -> &'static str {
    match outcome {
        Outcome::Completed { .. } => "completed",
        Outcome::Failed { .. } => "failed",
        Outcome::Cancelled { .. } => "cancelled",
        Outcome::Waiting { .. } => "waiting",
        Outcome::InputRequired { .. } => "input_required",
        Outcome::Interrupted => "interrupted",
        Outcome::Retry { .. } => "retry",
    }
}

/// A duration in store milliseconds; an absurd one (a job or an upstream's
/// `Retry-After` asking for centuries) saturates instead of wrapping into
/// the past.
fn to_json(value: &impl serde::Serialize) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

fn into_outcome(step: Step<Value>, now: Millis) -> Outcome {
    match step {
        Step::Done(result) => Outcome::Completed {
            result: to_json(&result),
        },
        Step::Fail(error) => Outcome::Failed {
            error: to_json(&error),
        },
        Step::Cancelled { status } => Outcome::Cancelled {
            status_message: status,
        },
        Step::Wait {
            state,
            status,
            after,
        } => Outcome::Waiting {
            state,
            status_message: status,
            due_at: now.saturating_add(after),
        },
        Step::Ask {
            state,
            status,
            requests,
        } => Outcome::InputRequired {
            state,
            status_message: status,
            requests: requests
                .into_iter()
                .map(|(key, request)| (key, to_json(&request)))
                .collect(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_retry_policy_is_an_hour_in_about_twenty_attempts() {
        let retry = RetryPolicy::default();
        let secs: Vec<u64> = (1..=11).map(|a| retry.backoff(a).as_secs()).collect();
        assert_eq!(secs, [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300]);
        assert_eq!(retry.scheduled(0), Duration::ZERO);
        let attempts = (1..).find(|&a| retry.scheduled(a) >= Duration::from_secs(3600));
        assert_eq!(attempts, Some(20));
    }
}
