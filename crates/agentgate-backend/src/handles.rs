//! What a backend may hold of the engine: a [`Nudge`] to make a waiting task
//! run its next step now (or to say that its tools changed), and [`UpstreamMetrics`] to count its upstream
//! calls. Both are small handles over traits the engine implements, so a
//! backend compiles without the engine and tests can hand it their own.

use std::borrow::Cow;
use std::sync::Arc;

use crate::{BoxFuture, TaskId};

/// Why a nudge did not reach the store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NudgeError {
    /// The task store failed; the task runs at its own time anyway.
    #[error("nudging the task failed: {0}")]
    Store(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// What a [`Nudge`] calls: the engine, or a test's stand-in.
pub trait NudgeTasks: Send + Sync + 'static {
    /// Makes `id` due now if it waits for its next step; returns whether it
    /// was waiting.
    fn nudge<'a>(&'a self, id: &'a TaskId) -> BoxFuture<'a, Result<bool, NudgeError>>;

    /// The backend's [`Backend::tools`](crate::Backend::tools) now says
    /// something else: serve that. The default (a test's stand-in) does
    /// nothing.
    fn tools_changed(&self) {}
}

/// Makes a waiting task run its next step now (its upstream changed),
/// instead of at the time its last step asked for.
#[derive(Clone)]
pub struct Nudge(Arc<dyn NudgeTasks>);

impl std::fmt::Debug for Nudge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Nudge").finish_non_exhaustive()
    }
}

impl Nudge {
    /// A handle that nudges through `target` (the engine, or a test's fake).
    pub fn new(target: impl NudgeTasks) -> Self {
        Self(Arc::new(target))
    }

    /// Makes `id` due now if it waits; returns whether it was waiting.
    pub async fn nudge(&self, id: &TaskId) -> Result<bool, NudgeError> {
        self.0.nudge(id).await
    }

    /// Tells the engine that the backend's tools changed (its upstream
    /// listed others, or came up after the gateway did): the engine asks
    /// [`Backend::tools`](crate::Backend::tools) (and
    /// [`Backend::setup`](crate::Backend::setup)) again, serves the new list
    /// and tells connected clients with `notifications/tools/list_changed`.
    /// A task of a tool no longer served fails its next step.
    pub fn tools_changed(&self) {
        self.0.tools_changed();
    }
}

/// How an upstream call ended, for the `agentgate_upstream_calls_total`
/// counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum UpstreamOutcome {
    /// A 2xx answer.
    Ok,
    /// 429, or the backend's own throttling signal.
    Throttled,
    /// 401, or the upstream's own "these credentials are not valid"
    /// (an AWS `UnrecognizedClientException`, say): the operator's
    /// credential is wrong or expired, which the gateway warns about.
    Rejected,
    /// Another 4xx.
    ClientError,
    /// A 5xx.
    ServerError,
    /// No HTTP answer: connection refused, reset, timed out.
    Transport,
}

impl UpstreamOutcome {
    /// The `outcome` label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Throttled => "throttled",
            Self::Rejected => "rejected",
            Self::ClientError => "client_error",
            Self::ServerError => "server_error",
            Self::Transport => "transport_error",
        }
    }

    /// The outcome an HTTP status says.
    pub fn from_status(status: u16) -> Self {
        match status {
            200..=299 => Self::Ok,
            401 => Self::Rejected,
            429 => Self::Throttled,
            500..=599 => Self::ServerError,
            _ => Self::ClientError,
        }
    }
}

/// Where [`UpstreamMetrics`] counts go: the engine's metrics registry.
pub trait UpstreamRecorder: Send + Sync + 'static {
    /// Counts one request of `backend`.
    fn record(&self, backend: &str, operation: &str, outcome: UpstreamOutcome);
}

/// Counts a backend's upstream requests by operation and outcome.
#[derive(Clone)]
pub struct UpstreamMetrics {
    recorder: Option<Arc<dyn UpstreamRecorder>>,
    backend: Cow<'static, str>,
}

impl std::fmt::Debug for UpstreamMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamMetrics")
            .field("backend", &self.backend)
            .finish_non_exhaustive()
    }
}

impl UpstreamMetrics {
    /// Counts of `backend` into `recorder`.
    pub fn new(backend: impl Into<Cow<'static, str>>, recorder: Arc<dyn UpstreamRecorder>) -> Self {
        Self {
            recorder: Some(recorder),
            backend: backend.into(),
        }
    }

    /// A handle whose counts go nowhere.
    pub fn detached(backend: impl Into<Cow<'static, str>>) -> Self {
        Self {
            recorder: None,
            backend: backend.into(),
        }
    }

    /// The backend the counts are labelled with.
    pub fn backend(&self) -> &str {
        &self.backend
    }

    /// Counts one request: `operation` is a small fixed vocabulary (an API
    /// operation name, never a URL or an id), to keep the series few.
    pub fn record(&self, operation: &str, outcome: UpstreamOutcome) {
        if let Some(recorder) = &self.recorder {
            recorder.record(&self.backend, operation, outcome);
        }
    }
}
