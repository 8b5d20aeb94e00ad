//! Prometheus metrics: what an operator watches on a running gateway.
//!
//! One [`Metrics`] per process, owning its own registry (no globals), shared
//! by the engine (steps, lease takeovers), the MCP handler (`tasks/get`) and
//! the backends (upstream calls, through an [`UpstreamMetrics`] handle).
//! [`Metrics::render`] produces the OpenMetrics text served at `/metrics`.
//!
//! | metric | type | labels |
//! |---|---|---|
//! | `agentgate_tasks` | gauge, read from the store at scrape time | `tool`, `status` |
//! | `agentgate_step_duration_seconds` | histogram | `tool`, `outcome` |
//! | `agentgate_lease_takeovers_total` | counter | |
//! | `agentgate_upstream_calls_total` | counter | `backend`, `operation`, `outcome` |
//! | `agentgate_task_gets_total` | counter | |
//!
//! Counters count what *this* process did; the task gauge is the whole
//! store's, so on several instances sharing PostgreSQL every instance reports
//! the same numbers (aggregate it with `max`, not `sum`).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentgate_backend::{TaskPhase, UpstreamMetrics, UpstreamOutcome};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};

use crate::store::{StoreResult, TaskStore};

/// The content type of [`Metrics::render`]'s output.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TaskLabels {
    tool: String,
    status: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StepLabels {
    tool: String,
    outcome: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct UpstreamLabels {
    backend: String,
    operation: String,
    outcome: String,
}

/// The metrics of one process. Cheap to clone; clones share everything.
#[derive(Debug, Clone)]
pub struct Metrics {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    registry: Registry,
    tasks: Family<TaskLabels, Gauge>,
    steps: Family<StepLabels, Histogram>,
    lease_takeovers: Counter,
    upstream: Family<UpstreamLabels, Counter>,
    task_gets: Counter,
    /// Held while the task gauge is refilled and the registry encoded, so
    /// two scrapes at once cannot mix their snapshots.
    scrape: Mutex<()>,
}

/// Steps last from milliseconds (a status check) to minutes (a slow
/// upstream answer, up to the step timeout): 5 ms to ~5.5 min.
fn step_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.005, 2.0, 17))
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let tasks = Family::<TaskLabels, Gauge>::default();
        registry.register(
            "agentgate_tasks",
            "Tasks in the task store by tool and status (ended tasks until they are swept)",
            tasks.clone(),
        );
        let steps =
            Family::<StepLabels, Histogram>::new_with_constructor(step_histogram as fn() -> _);
        registry.register_with_unit(
            "agentgate_step_duration",
            "Time a job step took in this process, by tool and outcome",
            Unit::Seconds,
            steps.clone(),
        );
        let lease_takeovers = Counter::default();
        registry.register(
            "agentgate_lease_takeovers",
            "Claims by this process of a task whose lease had expired while another worker held it",
            lease_takeovers.clone(),
        );
        let upstream = Family::<UpstreamLabels, Counter>::default();
        registry.register(
            "agentgate_upstream_calls",
            "HTTP requests this process sent to a backend, by backend, operation and outcome",
            upstream.clone(),
        );
        let task_gets = Counter::default();
        registry.register(
            "agentgate_task_gets",
            "tasks/get requests this process answered (clients polling)",
            task_gets.clone(),
        );
        Self {
            inner: Arc::new(Inner {
                registry,
                tasks,
                steps,
                lease_takeovers,
                upstream,
                task_gets,
                scrape: Mutex::new(()),
            }),
        }
    }

    /// The handle a backend counts its upstream requests with.
    pub fn upstream(&self, backend: impl Into<std::borrow::Cow<'static, str>>) -> UpstreamMetrics {
        UpstreamMetrics::new(
            backend,
            Arc::new(UpstreamFamily(
                self.inner.upstream.clone(),
                Mutex::default(),
            )),
        )
    }

    /// A step of `tool` ended with `outcome` after `took`.
    pub fn observe_step(&self, tool: &str, outcome: &str, took: Duration) {
        self.inner
            .steps
            .get_or_create(&StepLabels {
                tool: tool.to_owned(),
                outcome: outcome.to_owned(),
            })
            .observe(took.as_secs_f64());
    }

    /// This process took over a task whose lease had expired.
    pub fn lease_taken_over(&self) {
        self.inner.lease_takeovers.inc();
    }

    /// A `tasks/get` was answered.
    pub fn task_get(&self) {
        self.inner.task_gets.inc();
    }

    /// The OpenMetrics text for a scrape: the counters and histograms as they
    /// are, and the task gauge read from `store` now. Every tool in `tools`
    /// shows every status, 0 included, so a series that empties reads 0
    /// rather than vanishing.
    pub async fn render<'a>(
        &self,
        store: &dyn TaskStore,
        tools: impl IntoIterator<Item = &'a str>,
    ) -> StoreResult<String> {
        let counts = store.count_by_tool_and_status().await?;
        let _scrape = self
            .inner
            .scrape
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        let gauge = &self.inner.tasks;
        gauge.clear();
        for tool in tools {
            for status in ALL_STATUSES {
                gauge
                    .get_or_create(&TaskLabels {
                        tool: tool.to_owned(),
                        status: status.as_str().to_owned(),
                    })
                    .set(0);
            }
        }
        for count in counts {
            gauge
                .get_or_create(&TaskLabels {
                    tool: count.tool,
                    status: count.status.as_str().to_owned(),
                })
                .set(i64::try_from(count.count).unwrap_or(i64::MAX));
        }
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.inner.registry);
        Ok(text)
    }
}

const ALL_STATUSES: [TaskPhase; 5] = [
    TaskPhase::Working,
    TaskPhase::InputRequired,
    TaskPhase::Completed,
    TaskPhase::Failed,
    TaskPhase::Cancelled,
];

/// The engine's side of [`UpstreamMetrics`]: counts into the
/// `agentgate_upstream_calls` family, and warns (at most once a minute per
/// backend) when an upstream rejects the operator's credential, so a bad
/// or expired token shows in the log before users report it.
#[derive(Debug)]
struct UpstreamFamily(
    Family<UpstreamLabels, Counter>,
    Mutex<std::collections::HashMap<String, std::time::Instant>>,
);

/// How often a rejected credential is logged per backend.
const REJECTION_WARN_EVERY: Duration = Duration::from_secs(60);

impl UpstreamFamily {
    fn warn_rejected(&self, backend: &str, operation: &str) {
        let now = std::time::Instant::now();
        let mut last = self.1.lock().unwrap_or_else(|e| e.into_inner());
        if last
            .get(backend)
            .is_some_and(|at| now.duration_since(*at) < REJECTION_WARN_EVERY)
        {
            return;
        }
        last.insert(backend.to_owned(), now);
        tracing::warn!(
            backend,
            operation,
            "the upstream rejected the gateway's credential for this backend: check its token \
             or keys (see the backend's page in docs/backends); logged at most once a minute"
        );
    }
}

impl agentgate_backend::engine::UpstreamRecorder for UpstreamFamily {
    fn record(&self, backend: &str, operation: &str, outcome: UpstreamOutcome) {
        if outcome == UpstreamOutcome::Rejected {
            self.warn_rejected(backend, operation);
        }
        self.0
            .get_or_create(&UpstreamLabels {
                backend: backend.to_owned(),
                operation: operation.to_owned(),
                outcome: outcome.as_str().to_owned(),
            })
            .inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::SqliteStore;

    #[tokio::test]
    async fn render_names_every_metric_with_its_unit_and_zero_fills_tasks() {
        let store = SqliteStore::open("sqlite::memory:").await.expect("store");
        let metrics = Metrics::new();
        metrics.observe_step("t", "completed", Duration::from_millis(20));
        metrics.lease_taken_over();
        metrics.task_get();
        metrics.task_get();
        metrics
            .upstream("qbusiness")
            .record("ChatSync", UpstreamOutcome::Throttled);
        UpstreamMetrics::detached("qbusiness").record("ChatSync", UpstreamOutcome::Ok);
        let text = metrics.render(&store, ["t"]).await.expect("render");
        for line in [
            "agentgate_tasks{tool=\"t\",status=\"completed\"} 0",
            "agentgate_tasks{tool=\"t\",status=\"working\"} 0",
            "# UNIT agentgate_step_duration_seconds seconds",
            "agentgate_step_duration_seconds_count{tool=\"t\",outcome=\"completed\"} 1",
            "agentgate_lease_takeovers_total 1",
            "agentgate_task_gets_total 2",
            "agentgate_upstream_calls_total{backend=\"qbusiness\",operation=\"ChatSync\",outcome=\"throttled\"} 1",
        ] {
            assert!(text.contains(line), "missing `{line}` in\n{text}");
        }
        assert!(
            !text.contains("outcome=\"ok\""),
            "a detached handle counts into nothing served:\n{text}"
        );
    }
}
