//! The servers under test, run as child processes of the bench (`agentgate-bench
//! serve KIND`), so each has its own runtime and its own peak RSS.
//!
//! - `agentgate`: the [`Gateway`] of agentgate-core on a SQLite or PostgreSQL
//!   store, with the bench tool as its only job, behind core's `http_router`.
//! - `baseline`: a minimal rmcp server whose tasks live in rmcp's own
//!   in-memory [`TaskManager`], same tool, behind the *same* `http_router`
//!   (same axum/hyper stack, same Streamable HTTP config, same middleware).
//! - `echo`: a bare axum route that parses the JSON body and sends it back:
//!   the transport's limit on this machine.
//!
//! Every server prints `listening http://ADDR` as its first stdout line.

use std::borrow::Cow;
use std::net::SocketAddr;
use std::time::Duration;

use agentgate_core::job::{Event, Job, JobContext, Step, StepResult, ToolSpec};
use agentgate_core::mcp::{Gateway, HttpOptions, http_router, serve_http};
use agentgate_core::runtime::Runtime;
use agentgate_core::task::{PollPolicy, ToolPolicy};
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

/// agentgate's gateway on `store`, as production serves it.
pub(crate) async fn agentgate(listen: SocketAddr, store_url: &str) -> anyhow::Result<()> {
    let store = agentgate_core::store::open(store_url)
        .await
        .with_context(|| {
            format!(
                "opening store {}",
                agentgate_core::store::redact_url(store_url)
            )
        })?;
    let runtime = Runtime::builder(store)
        .tool(ToolSpec::new(TOOL, DESCRIPTION, policy(), SleepJob))
        .start()?;
    stop_on_ctrl_c(runtime.shutdown_token());
    let listener = bind(listen).await?;
    let served = runtime.serve_http(listener, HttpOptions::default()).await;
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
        let args: SleepArgs = agentgate_core::job::parse_args(&args)
            .map_err(|e| ErrorData::invalid_params(e, None))?;
        // The same gate as agentgate's: a task only for a 2026-07-28 request
        // that declares the tasks extension.
        if !Gateway::wants_task(&cx) {
            return Err(ErrorData::missing_required_client_capability(
                ClientCapabilities::builder().enable_tasks().build(),
            ));
        }
        let options = TaskOptions::new()
            .with_ttl_ms(agentgate_core::clock::wire_ms(TTL))
            .with_poll_interval_ms(agentgate_core::clock::wire_ms(POLL))
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

/// The baseline behind the same router agentgate uses.
pub(crate) async fn baseline(listen: SocketAddr) -> anyhow::Result<()> {
    let shutdown = CancellationToken::new();
    stop_on_ctrl_c(&shutdown);
    let router = http_router(
        Baseline::default(),
        HttpOptions::default(),
        shutdown.clone(),
    );
    let listener = bind(listen).await?;
    serve_http(listener, router, shutdown)
        .await
        .context("serving HTTP")
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
