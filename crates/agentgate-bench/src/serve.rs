//! The servers under test, run as child processes of the bench (`agentgate-bench
//! serve KIND`), so each has its own runtime and its own peak RSS.
//!
//! - `agentgate`: the [`Gateway`] of agentgate-core on a SQLite or PostgreSQL
//!   store, with the bench tool as its only job, served as `agentgate serve`
//!   serves it: core's `http_router` in core's accept loop, `[limits]` on
//!   ([`bench_limits`]: the defaults, with the three caps the bench's load
//!   would hit raised so every check still runs but none refuses), `[auth]`
//!   in its default mode (`none`: every caller is `anonymous`). With
//!   `--token-sha256` it checks bearer tokens (mode `tokens`, for the layer
//!   ladder), with `--no-limits` it enforces no limits (the ladder, and the
//!   RSS runs, where one principal holds far more than 200 live tasks).
//! - `baseline` (reported as `baseline-rmcp-our-stack`): a minimal rmcp
//!   server whose tasks live in rmcp's own in-memory [`TaskManager`], same
//!   tool, behind the *same* `http_router` and accept loop as agentgate (same
//!   Streamable HTTP config, same middleware); `--token-sha256` puts auth in
//!   front as for agentgate.
//! - `baseline-plain` (`baseline-rmcp-plain`): the same handler on rmcp's own
//!   default Streamable HTTP stack (`StreamableHttpService`,
//!   `LocalSessionManager`, `StreamableHttpServerConfig::default()`) under
//!   `axum::serve` with `TCP_NODELAY` on accepted sockets: none of our layers.
//! - `baseline-accept`: the plain stack inside core's accept loop
//!   (`serve_http`: connection cap, header-read and idle timeouts), for the
//!   ladder's first rung.
//! - `echo`: a bare axum route that parses the JSON body and sends it back:
//!   the transport's limit on this machine.
//!
//! Every server prints `listening http://ADDR` as its first stdout line.

use std::borrow::Cow;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use agentgate_backend::{
    Event, Job, JobContext, PollPolicy, Step, StepResult, ToolPolicy, ToolSpec,
};
use agentgate_core::auth::{AuthConfig, AuthMode, Authenticator, TokenEntry};
use agentgate_core::mcp::{Gateway, HttpOptions, Limits, http_router, serve_http};
use agentgate_core::runtime::Runtime;
use anyhow::Context as _;
use rmcp::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ClientCapabilities,
    ContentBlock, CreateTaskResult, ErrorData, GetTaskParams, GetTaskResult, Implementation,
    ListToolsResult, PaginatedRequestParams, ProtocolVersion, ServerCapabilities, ServerConfig,
    Tool, UpdateTaskParams,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::task_manager::{TaskManager, TaskOptions};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use schemars::JsonSchema;
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

/// The one tool every server offers.
pub(crate) const TOOL: &str = "bench_sleep";
const DESCRIPTION: &str = "Benchmark tool: finishes after `ms` milliseconds (0: at once).";
/// Both servers suggest the same poll interval and TTL.
const POLL: Duration = Duration::from_millis(100);
const TTL: Duration = Duration::from_secs(3600);

#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct SleepArgs {
    /// Milliseconds before the task completes.
    #[serde(default)]
    ms: u64,
}

fn result(ms: u64) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(format!("slept {ms} ms"))])
}

/// The bench tool as an agentgate job: one step that either finishes or
/// waits `ms` (a checkpointed wait, like every real backend's watch step).
#[derive(Debug)]
pub(crate) struct SleepJob;

impl Job for SleepJob {
    type Args = SleepArgs;
    type State = u64;

    async fn start(&self, args: SleepArgs, _cx: &JobContext) -> StepResult<u64> {
        if args.ms == 0 {
            return Ok(Step::Done(result(0)));
        }
        Ok(Step::Wait {
            state: args.ms,
            status: Some("sleeping".to_owned()),
            after: Duration::from_millis(args.ms),
        })
    }

    async fn resume(&self, ms: u64, _event: Event, _cx: &JobContext) -> StepResult<u64> {
        Ok(Step::Done(result(ms)))
    }
}

fn policy() -> ToolPolicy {
    ToolPolicy::default()
        .ttl(Some(TTL))
        .poll(PollPolicy::fixed(POLL))
        .sync_budget(Duration::from_secs(30))
        .step_timeout(Duration::from_secs(30))
        .sync_fallback(true)
}

async fn bind(listen: SocketAddr) -> anyhow::Result<tokio::net::TcpListener> {
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("binding {listen}"))?;
    let local = listener.local_addr().context("reading the bound address")?;
    // The parent reads this line to know where to connect.
    println!("listening http://{local}");
    Ok(listener)
}

fn stop_on_ctrl_c(shutdown: &CancellationToken) {
    let stop = shutdown.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            stop.cancel();
        }
    });
}

/// How a server under test checks its callers and what it enforces.
#[derive(Debug, Clone, Default)]
pub(crate) struct Layers {
    /// `[auth] mode = "tokens"` with one token of this SHA-256 (principal
    /// `bench`); `None`: mode `none`, `agentgate serve`'s default.
    pub token_sha256: Option<String>,
    /// agentgate only: enforce no `[limits]` at all.
    pub no_limits: bool,
}

/// The principal of the bench's bearer token.
const PRINCIPAL: &str = "bench";

/// The `[limits]` defaults (`agentgate serve` with no `[limits]` section),
/// except for the caps a load generator acting as one principal would be
/// refused by. `requests_per_second`/`request_burst` (100/s after a burst of
/// 500) and `poll_burst` (20 polls of one task per 100 ms `pollIntervalMs`;
/// the lifecycle polls every 2 ms) are raised out of reach, not turned off
/// (0 would skip the check), so the token bucket and the poll cache's
/// counting still run on every request. The live-task cap
/// (`max_active_tasks`, 200 by default) is off: the bench holds tens of
/// thousands of live tasks as one principal, and a cap raised that far
/// would measure counting them, which a deployment's cap bounds (the check
/// reads at most `max_active_tasks` index entries). The storage quotas
/// (`max_stored_tasks`, `max_stored_bytes`) are off for the same reason: a
/// run stores far more than 10 000 tasks as one principal, and with both
/// off a create makes no extra query. The poll cache, the input cap and
/// the TTL cap are the defaults.
pub(crate) fn bench_limits() -> Limits {
    Limits {
        max_active_tasks: 0,
        max_stored_tasks: 0,
        max_stored_bytes: 0,
        requests_per_second: 1e12,
        request_burst: u32::MAX,
        poll_burst: u32::MAX,
        ..Limits::default()
    }
}

/// `HttpOptions::default()` with the authenticator `layers` ask for.
fn http_options(
    layers: &Layers,
    listener: &tokio::net::TcpListener,
) -> anyhow::Result<HttpOptions> {
    let mut options = HttpOptions::default();
    let mut auth = AuthConfig::default();
    if let Some(sha256) = &layers.token_sha256 {
        auth.mode = AuthMode::Tokens;
        auth.tokens.push(TokenEntry {
            principal: PRINCIPAL.to_owned(),
            sha256: Some(sha256.clone()),
            token_env: None,
        });
    }
    // As `agentgate serve` builds it: the resource defaults to this URL.
    let url = format!("http://{}/mcp", listener.local_addr()?);
    options.auth =
        Authenticator::from_config(&auth, &url, |_| None).context("configuring authentication")?;
    Ok(options)
}

/// agentgate's gateway on `store`, as `agentgate serve` serves it (see the
/// module docs for `layers`).
pub(crate) async fn agentgate(
    listen: SocketAddr,
    store_url: &str,
    layers: &Layers,
) -> anyhow::Result<()> {
    let store = agentgate_core::store::open(store_url)
        .await
        .with_context(|| {
            format!(
                "opening store {}",
                agentgate_core::store::redact_url(store_url)
            )
        })?;
    let mut builder =
        Runtime::builder(store).tool(ToolSpec::new(TOOL, DESCRIPTION, policy(), SleepJob));
    if !layers.no_limits {
        builder = builder.limits(bench_limits());
    }
    let runtime = builder.start()?;
    stop_on_ctrl_c(runtime.shutdown_token());
    let listener = bind(listen).await?;
    let options = http_options(layers, &listener)?;
    let served = runtime.serve_http(listener, options).await;
    runtime.stop().await?;
    served.context("serving HTTP")
}

/// The baseline: rmcp's in-memory `TaskManager` with the same tool.
#[derive(Clone, Default)]
pub(crate) struct Baseline {
    tasks: TaskManager,
}

impl std::fmt::Debug for Baseline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Baseline").finish_non_exhaustive()
    }
}

fn bench_tool() -> Tool {
    let schema = rmcp::handler::server::common::schema_for_type::<SleepArgs>();
    Tool::new(TOOL, DESCRIPTION, schema)
}

impl ServerHandler for Baseline {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tasks()
                .build(),
        )
        .with_server_info(Implementation::new(
            "rmcp-baseline",
            env!("CARGO_PKG_VERSION"),
        ))
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Owned(vec![
            ProtocolVersion::V_2025_06_18,
            ProtocolVersion::V_2025_11_25,
            ProtocolVersion::V_2026_07_28,
        ])
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(vec![bench_tool()]))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        (name == TOOL).then(bench_tool)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if request.name != TOOL {
            return Err(ErrorData::invalid_params(
                format!("unknown tool `{}`", request.name),
                None,
            ));
        }
        let args = request.arguments.unwrap_or_default();
        let args: SleepArgs =
            agentgate_backend::parse_args(&args).map_err(|e| ErrorData::invalid_params(e, None))?;
        // The same gate as agentgate's: a task only for a 2026-07-28 request
        // that declares the tasks extension.
        if !Gateway::wants_task(&cx) {
            return Err(ErrorData::missing_required_client_capability(
                ClientCapabilities::builder().enable_tasks().build(),
            ));
        }
        let options = TaskOptions::new()
            .with_ttl_ms(agentgate_backend::engine::wire_ms(TTL))
            .with_poll_interval_ms(agentgate_backend::engine::wire_ms(POLL))
            .with_status_message("queued");
        let ms = args.ms;
        let task = self.tasks.spawn(options, move |_cx| {
            Box::pin(async move {
                if ms > 0 {
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                }
                Ok(result(ms))
            })
        });
        Ok(CreateTaskResult::new(task).into())
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        Ok(GetTaskResult::new(self.tasks.get_task(&request.task_id)?))
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.tasks
            .update_task(&request.task_id, request.input_responses)
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.tasks.cancel_task(&request.task_id)
    }
}

/// The baseline behind the same router and accept loop agentgate uses.
pub(crate) async fn baseline(listen: SocketAddr, layers: &Layers) -> anyhow::Result<()> {
    let shutdown = CancellationToken::new();
    stop_on_ctrl_c(&shutdown);
    let listener = bind(listen).await?;
    let options = http_options(layers, &listener)?;
    let router = http_router(Baseline::default(), options, shutdown.clone());
    serve_http(listener, router, shutdown)
        .await
        .context("serving HTTP")
}

/// rmcp's own Streamable HTTP service with its default configuration (the
/// client needs nothing else: its `Host` is allowed, it sends no `Origin`).
/// One handler, cloned for each request as `http_router` does: the clones
/// share one `TaskManager`.
fn plain_router() -> axum::Router {
    let handler = Baseline::default();
    let service = StreamableHttpService::new(
        move || Ok(handler.clone()),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    axum::Router::new().nest_service("/mcp", service)
}

/// The baseline on rmcp's plain stack under `axum::serve`, with
/// `TCP_NODELAY` on every accepted socket.
pub(crate) async fn baseline_plain(listen: SocketAddr) -> anyhow::Result<()> {
    use axum::serve::ListenerExt as _;
    let shutdown = CancellationToken::new();
    stop_on_ctrl_c(&shutdown);
    let listener = bind(listen).await?.tap_io(|tcp| {
        if let Err(e) = tcp.set_nodelay(true) {
            eprintln!("could not set TCP_NODELAY: {e}");
        }
    });
    axum::serve(listener, plain_router())
        .with_graceful_shutdown(shutdown.cancelled_owned())
        .await
        .context("serving HTTP")
}

/// The plain stack inside core's accept loop (`serve_http`).
pub(crate) async fn baseline_accept(listen: SocketAddr) -> anyhow::Result<()> {
    let shutdown = CancellationToken::new();
    stop_on_ctrl_c(&shutdown);
    let listener = bind(listen).await?;
    serve_http(listener, plain_router(), shutdown)
        .await
        .context("serving HTTP")
}

/// Opens the store at `url` (applying its migrations) and returns. In a
/// process of its own: core's PostgreSQL store leaves its `LISTEN` relay
/// running after the store is dropped, and the bench must not keep one on a
/// database it is about to drop.
pub(crate) async fn migrate(store_url: &str) -> anyhow::Result<()> {
    drop(
        agentgate_core::store::open(store_url)
            .await
            .with_context(|| {
                format!(
                    "opening store {}",
                    agentgate_core::store::redact_url(store_url)
                )
            })?,
    );
    Ok(())
}

/// A bare JSON echo at `/mcp`: parse the body, serialize it back.
pub(crate) async fn echo(listen: SocketAddr) -> anyhow::Result<()> {
    let shutdown = CancellationToken::new();
    stop_on_ctrl_c(&shutdown);
    let router = axum::Router::new().route(
        "/mcp",
        axum::routing::post(
            |axum::Json(body): axum::Json<serde_json::Value>| async move { axum::Json(body) },
        ),
    );
    let listener = bind(listen).await?;
    serve_http(listener, router, shutdown)
        .await
        .context("serving HTTP")
}
