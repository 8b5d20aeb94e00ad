//! The runtime: one engine and all of its background work under one
//! shutdown tree, and the gateways that serve it.
//!
//! ```text
//! Runtime::builder(store)          .config(..) .limits(..) .backend(..)… .start()
//!   start: tools of every backend ─▶ ToolRegistry (a name served twice is refused;
//!          made again when a backend's Nudge says its tools changed: catalog)
//!          spawn Engine::run       (scheduler, sweeper, change relay; steps)
//!          spawn Backend::run      (each backend's watcher / refresh), with a Nudge
//! runtime.tasks()                  ─▶ Tasks: create, get, answer, cancel, watch (the one door)
//! runtime.probes()                 ─▶ Probes: is the store answering; the metrics page
//! runtime.gateway(transport)       ─▶ Gateway with the limits and the backends ─▶ stdio or HTTP
//! runtime.webhook_router()         ─▶ POST /hooks/{backend}/…   ─▶ each backend's Webhook
//! runtime.stop()                   ─▶ cancel the tree, wait for every task:
//!                                     steps interrupted, leases released
//! ```
//!
//! Nothing is detached: [`Runtime::stop`] returns once the scheduler and
//! every backend task have returned, and says which one panicked if any did.

use std::sync::Arc;

use agentgate_backend::engine::NudgeTasks;
use agentgate_backend::{
    Backend, BoxFuture, ConfiguredBackend, Nudge, NudgeError, TaskId, ToolSpec, UpstreamMetrics,
    WEBHOOK_PREFIX, Webhook, WebhookRequest,
};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::catalog::{Build, ToolCatalog};
use crate::clock::{Clock, SystemClock};
use crate::engine::{Engine, EngineConfig, Tasks};
use crate::mcp::{Gateway, Limits, TransportKind};
use crate::metrics::Metrics;
use crate::store::seal::SealError;
use crate::store::{StoreResult, TaskStore};

/// Why a runtime did not start or did not stop cleanly.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RuntimeError {
    /// Two backends (or a backend and a tool added by hand) serve a tool of
    /// the same name.
    #[error("tool `{tool}` is served by both {first} and {second}; rename one of them")]
    DuplicateTool {
        tool: String,
        first: String,
        second: String,
    },
    /// The tool selection names something no backend serves.
    #[error(
        "the tool selection names `{name}`, which is neither a tool nor a backend of this \
         gateway; the tools are: {tools}; the backends: {backends}"
    )]
    UnknownSelection {
        name: String,
        tools: String,
        backends: String,
    },
    /// A background task panicked.
    #[error("the {task} task panicked: {source}")]
    Panicked {
        task: String,
        #[source]
        source: tokio::task::JoinError,
    },
}

/// Builds a [`Runtime`]; see [`Runtime::builder`].
pub struct RuntimeBuilder {
    store: Arc<dyn TaskStore>,
    config: EngineConfig,
    clock: Arc<dyn Clock>,
    metrics: Metrics,
    limits: Option<Limits>,
    /// Tools added by hand ([`RuntimeBuilder::tool`]).
    by_hand: Vec<ToolSpec>,
    selection: Option<Vec<String>>,
    read_only: bool,
    backends: Vec<(&'static str, Arc<dyn Backend>)>,
    webhooks: Vec<(String, Arc<dyn Webhook>)>,
    run_steps: bool,
}

impl std::fmt::Debug for RuntimeBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RuntimeBuilder")
            .field("config", &self.config)
            .field(
                "backends",
                &self
                    .backends
                    .iter()
                    .map(|(name, _)| name)
                    .collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

impl RuntimeBuilder {
    /// The engine's settings (default: [`EngineConfig::default`]).
    pub fn config(mut self, config: EngineConfig) -> Self {
        self.config = config;
        self
    }

    /// The engine's clock (default: the wall clock).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Per-principal limits for the gateways [`Runtime::gateway`] makes
    /// (default: none, which suits embedded and benchmark use).
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = Some(limits);
        self
    }

    /// The handle a backend built before [`Self::backend`] counts its
    /// upstream calls with, labelled `backend`.
    pub fn upstream_metrics(&self, backend: &str) -> UpstreamMetrics {
        self.metrics.upstream(backend.to_owned())
    }

    /// Serves `backend`'s tools and runs its background work, under its
    /// [`ConfiguredBackend::NAME`]. The tools of a backend whose
    /// [`Backend::setup`] is not ready are served but not listed.
    pub fn backend<B: ConfiguredBackend>(mut self, backend: B) -> Self {
        let name = B::NAME;
        if let Some(webhook) = backend.webhook() {
            self.webhooks.push((name.to_owned(), webhook));
        }
        self.backends.push((name, Arc::new(backend)));
        self
    }

    /// Serves only the tools `names` names, each a tool or a backend (all
    /// of its tools); `task_status`, `task_answer` and `task_cancel` are
    /// always served. A name that matches nothing fails [`Self::start`].
    /// The others are not served at all: a call gets "unknown tool".
    pub fn select_tools(mut self, names: Vec<String>) -> Self {
        self.selection = Some(names);
        self
    }

    /// Serves only the tools whose definitions say they change nothing
    /// (`annotations.readOnlyHint: true`), after any selection; the task
    /// tools (`task_status`, `task_answer`, `task_cancel`) stay. A tool
    /// that says nothing is taken to change something.
    pub fn read_only(mut self, on: bool) -> Self {
        self.read_only = on;
        self
    }

    /// Whether this instance claims and runs steps (default: yes). One
    /// that does not still serves every request: its tasks wait for an
    /// instance that runs steps (on PostgreSQL, another one), and tests
    /// see a task exactly as it was created.
    pub fn run_steps(mut self, run: bool) -> Self {
        self.run_steps = run;
        self
    }

    /// Serves one more tool, outside any backend.
    pub fn tool(mut self, spec: ToolSpec) -> Self {
        self.by_hand.push(spec);
        self
    }

    /// Starts the engine and every backend's background work.
    pub fn start(self) -> Result<Runtime, RuntimeError> {
        let catalog = Arc::new(ToolCatalog {
            backends: self.backends.clone(),
            by_hand: self.by_hand,
            selection: self.selection,
            read_only: self.read_only,
        });
        let registry = catalog.registry(Build::Strict)?;
        let engine = Engine::new(self.store, registry, self.clock, self.config, self.metrics);
        let shutdown = CancellationToken::new();
        let mut tasks = Vec::new();
        if self.run_steps {
            tasks.push((
                "scheduler".to_owned(),
                tokio::spawn(engine.clone().run(shutdown.clone())),
            ));
        }
        for (name, backend) in &self.backends {
            let nudge = Nudge::new(EngineNudge {
                engine: engine.clone(),
                catalog: catalog.clone(),
            });
            let work = backend.run(nudge, shutdown.child_token());
            tasks.push((format!("backend `{name}`"), tokio::spawn(work)));
        }
        Ok(Runtime {
            engine,
            catalog,
            shutdown,
            limits: self.limits,
            tasks,
            webhooks: self.webhooks,
            backends: Arc::from(self.backends),
        })
    }
}

/// The engine and its background work, until [`Runtime::stop`].
pub struct Runtime {
    engine: Engine,
    catalog: Arc<ToolCatalog>,
    shutdown: CancellationToken,
    limits: Option<Limits>,
    tasks: Vec<(String, JoinHandle<()>)>,
    webhooks: Vec<(String, Arc<dyn Webhook>)>,
    /// Every backend, shown the requests made with an OAuth access token.
    backends: Arc<[(&'static str, Arc<dyn Backend>)]>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("engine", &self.engine)
            .field("tasks", &self.tasks)
            .field(
                "webhooks",
                &self.webhooks.iter().map(|(n, _)| n).collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

/// How long a webhook request's body may take to arrive: senders are
/// servers posting small notifications, and until it has arrived (or not)
/// the connection is held.
const WEBHOOK_BODY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

impl Runtime {
    /// A runtime on `store`: add backends, then [`RuntimeBuilder::start`].
    pub fn builder(store: Arc<dyn TaskStore>) -> RuntimeBuilder {
        RuntimeBuilder {
            store,
            config: EngineConfig::default(),
            clock: Arc::new(SystemClock),
            metrics: Metrics::new(),
            limits: None,
            by_hand: Vec::new(),
            selection: None,
            read_only: false,
            backends: Vec::new(),
            webhooks: Vec::new(),
            run_steps: true,
        }
    }

    /// The task service: the one way to create, read, answer, cancel and
    /// watch tasks from outside the crate.
    pub fn tasks(&self) -> Tasks {
        Tasks::new(self.engine.clone())
    }

    /// What `/readyz` and `/metrics` read.
    pub fn probes(&self) -> Probes {
        Probes {
            engine: self.engine.clone(),
        }
    }

    /// A [`Nudge`] on this runtime's engine, for a backend whose
    /// background work a test or a benchmark drives by hand (the runtime
    /// gives each backend it runs its own).
    pub fn nudger(&self) -> Nudge {
        Nudge::new(EngineNudge {
            engine: self.engine.clone(),
            catalog: self.catalog.clone(),
        })
    }

    /// The root of the shutdown tree: cancel it (say, on a signal) and
    /// serving ends; [`Runtime::stop`] then waits for the rest.
    pub fn shutdown_token(&self) -> &CancellationToken {
        &self.shutdown
    }

    /// Every backend it serves, with its name, in the order they were added.
    pub fn backends(&self) -> &[(&'static str, Arc<dyn Backend>)] {
        &self.backends
    }

    /// A gateway over this runtime's engine for `transport`, with the
    /// builder's limits.
    pub async fn gateway(&self, transport: TransportKind) -> Result<Gateway, SealError> {
        let gateway = Gateway::new(self.tasks(), transport)
            .await?
            .with_backends(self.backends.iter().map(|(_, b)| b.clone()).collect());
        Ok(match &self.limits {
            Some(limits) => gateway.with_limits(limits.clone()),
            None => gateway,
        })
    }

    /// Serves one client on stdin/stdout as `owner` until the client leaves
    /// or the runtime shuts down.
    pub async fn serve_stdio(&self, owner: agentgate_backend::Owner) -> std::io::Result<()> {
        let gateway = self
            .gateway(TransportKind::Stdio(owner))
            .await
            .map_err(std::io::Error::other)?;
        crate::mcp::serve_stdio(gateway, self.shutdown.clone()).await
    }

    /// Serves Streamable HTTP at `/mcp` on `listener` until shutdown.
    pub async fn serve_http(
        &self,
        listener: tokio::net::TcpListener,
        options: crate::mcp::HttpOptions,
    ) -> std::io::Result<()> {
        let gateway = self
            .gateway(TransportKind::Http)
            .await
            .map_err(std::io::Error::other)?;
        let router = crate::mcp::http_router(gateway, options, self.shutdown.clone());
        crate::mcp::serve_http(listener, router, self.shutdown.clone()).await
    }

    /// `POST /hooks/{backend}/{*path}` for every backend with a
    /// [`Webhook`]: merge it into the HTTP router that serves `/mcp`. Not
    /// behind `/mcp`'s authentication: each webhook checks its senders,
    /// before its body is read ([`Webhook::check_sender`]).
    pub fn webhook_router(&self) -> axum::Router {
        let mut router = axum::Router::new();
        for (name, webhook) in &self.webhooks {
            let webhook = webhook.clone();
            router = router.route(
                &format!("{WEBHOOK_PREFIX}/{name}/{{*path}}"),
                axum::routing::post(
                    move |path: axum::extract::Path<String>, request: axum::extract::Request| {
                        let webhook = webhook.clone();
                        async move { call_webhook(&*webhook, path.0, request).await }
                    },
                ),
            );
        }
        router
    }

    /// Shuts everything down and waits: running steps are interrupted (they
    /// run again from their last checkpoint, here or elsewhere), leases are
    /// released, every backend's background work has returned.
    pub async fn stop(self) -> Result<(), RuntimeError> {
        self.shutdown.cancel();
        let mut first_panic = None;
        for (task, handle) in self.tasks {
            if let Err(source) = handle.await {
                tracing::error!(%task, error = %source, "background task panicked");
                first_panic.get_or_insert(RuntimeError::Panicked { task, source });
            }
        }
        first_panic.map_or(Ok(()), Err)
    }
}

/// One webhook request, in the SDK's plain types and back: the sender is
/// checked from the head, then at most the webhook's body limit is read
/// within [`WEBHOOK_BODY_TIMEOUT`].
async fn call_webhook(
    webhook: &dyn Webhook,
    path: String,
    request: axum::extract::Request,
) -> axum::response::Response {
    use axum::response::IntoResponse as _;
    let (parts, body) = request.into_parts();
    let headers = parts
        .headers
        .iter()
        .filter_map(|(name, value)| {
            value
                .to_str()
                .ok()
                .map(|v| (name.as_str().to_owned(), v.to_owned()))
        })
        .collect();
    let mut request = WebhookRequest {
        path,
        headers,
        body: Vec::new(),
    };
    let answer = |answer: agentgate_backend::WebhookResponse| {
        let status = http::StatusCode::from_u16(answer.status)
            .unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR);
        (status, answer.body).into_response()
    };
    // A wrong token is told so before a byte of the body is read.
    if let Some(refusal) = webhook.check_sender(&request) {
        return answer(refusal);
    }
    let max = webhook.max_body_bytes();
    let too_large = || {
        (
            http::StatusCode::PAYLOAD_TOO_LARGE,
            format!("a webhook body is at most {max} bytes\n"),
        )
            .into_response()
    };
    let declared = parts
        .headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > u64::try_from(max).unwrap_or(u64::MAX)) {
        return too_large();
    }
    match tokio::time::timeout(WEBHOOK_BODY_TIMEOUT, read_at_most(body, max)).await {
        Ok(Ok(Some(bytes))) => request.body = bytes,
        Ok(Ok(None)) => return too_large(),
        Ok(Err(_)) | Err(_) => {
            return (
                http::StatusCode::REQUEST_TIMEOUT,
                format!(
                    "the body did not arrive whole within {} s\n",
                    WEBHOOK_BODY_TIMEOUT.as_secs()
                ),
            )
                .into_response();
        }
    }
    answer(webhook.handle(request).await)
}

/// The body if it is at most `max` bytes, `None` as soon as it is longer
/// (the rest is not read).
async fn read_at_most(
    mut body: axum::body::Body,
    max: usize,
) -> Result<Option<Vec<u8>>, axum::Error> {
    use http_body_util::BodyExt as _;
    let mut bytes = Vec::new();
    while let Some(frame) = body.frame().await {
        if let Ok(data) = frame?.into_data() {
            if bytes.len().saturating_add(data.len()) > max {
                return Ok(None);
            }
            bytes.extend_from_slice(&data);
        }
    }
    Ok(Some(bytes))
}

/// The engine as a backend's [`Nudge`] target.
struct EngineNudge {
    engine: Engine,
    /// What the tools are made from, made again when a backend says its
    /// tools changed.
    catalog: Arc<ToolCatalog>,
}

impl NudgeTasks for EngineNudge {
    fn nudge<'a>(&'a self, id: &'a TaskId) -> BoxFuture<'a, Result<bool, NudgeError>> {
        Box::pin(async move {
            self.engine
                .nudge(id)
                .await
                .map_err(|e| NudgeError::Store(Box::new(e)))
        })
    }

    fn tools_changed(&self) {
        // Lenient never fails: a clash is logged and skipped.
        match self.catalog.registry(Build::Lenient) {
            Ok(registry) => {
                let count = registry.listed().count();
                if self.engine.replace_tools(registry) {
                    tracing::info!(listed = count, "the tools served changed");
                }
            }
            Err(e) => tracing::warn!(error = %e, "the tools served could not be made again"),
        }
    }
}

/// What an operator's probes read from a running runtime: whether the task
/// store answers, and the metrics. Cheap to clone into a route.
#[derive(Debug, Clone)]
pub struct Probes {
    engine: Engine,
}

impl Probes {
    /// Whether the task store answers a query (one indexed read).
    pub async fn store_answers(&self) -> StoreResult<()> {
        self.engine.store().next_due().await.map(drop)
    }

    /// The Prometheus metrics in the OpenMetrics text format; the task
    /// gauge is read from the store now.
    pub async fn metrics(&self) -> StoreResult<String> {
        let tools = self.engine.tools();
        let names = tools.iter().map(|spec| spec.tool.name.as_ref());
        self.engine
            .metrics()
            .render(&**self.engine.store(), names)
            .await
    }
}
