//! The gateway: agentgate's rmcp `ServerHandler`.
//!
//! Every request is answered from the store, scoped to the caller's owner, so
//! any process on the same store can serve any request. Whether `tools/call`
//! returns a task handle is decided per request: only a request at protocol
//! 2026-07-28 or later that declares the tasks extension gets one (rmcp would
//! also honour a legacy session's `initialize` capabilities, which the
//! extension forbids, so the gate is ours).

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use rmcp::ServerHandler;
use rmcp::model::RequestStateCodec;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ClientCapabilities,
    ContentBlock, CreateTaskResult, ErrorData, GetTaskParams, GetTaskResult, Implementation,
    ListToolsResult, PaginatedRequestParams, ProtocolVersion, ServerCapabilities, ServerConfig,
    SubscriptionFilter, Tool, UpdateTaskParams,
};
use rmcp::service::{RequestContext, RoleServer, SubscriptionContext};
use serde_json::Value;

use super::limits::{self, Guard, Limits, Poll};
use super::wire;
use crate::scheduler::Engine;
use crate::store::StoreError;
use crate::store::seal::{self, SealError};
use crate::task::{NewTask, Owner, TaskId};

/// An authenticated HTTP principal, placed in the request's extensions by an
/// authentication layer. Without one, HTTP callers are [`Owner::anonymous`].
#[derive(Debug, Clone)]
pub struct Principal(pub Owner);

/// Where the gateway's clients come from, which decides who owns their tasks.
#[derive(Debug, Clone)]
pub enum TransportKind {
    /// One local client: every task belongs to this owner.
    Stdio(Owner),
    /// Many clients: the owner is the request's [`Principal`].
    Http,
}

/// agentgate's MCP server.
#[derive(Clone)]
pub struct Gateway {
    pub(super) engine: Engine,
    transport: TransportKind,
    pub(super) sealer: Arc<RequestStateCodec>,
    info: Implementation,
    instructions: Option<String>,
    /// Per-principal limits; `None` (the default) enforces none.
    guard: Option<Arc<Guard>>,
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway")
            .field("transport", &self.transport)
            .field("info", &self.info)
            .finish_non_exhaustive()
    }
}

/// The error every task request gets for an unknown, expired or foreign id.
pub(crate) fn unknown_task() -> ErrorData {
    ErrorData::invalid_params(
        "unknown or expired task id; task ids come from a tools/call CreateTaskResult",
        None,
    )
}

/// How long a client is asked to wait before retrying a request that met a
/// store outage.
const OUTAGE_RETRY_AFTER_SECONDS: u64 = 5;

/// The JSON-RPC error for a store failure. An outage (disk full, read-only,
/// database away) says so and how long to wait, in `data`
/// (`{"reason": "disk_full", "retryAfterSeconds": 5}`), so a client can tell
/// "try again" from "you asked for something that does not exist".
pub(crate) fn store_error(e: StoreError) -> ErrorData {
    match e {
        StoreError::NotFound => unknown_task(),
        StoreError::Unavailable { cause, ref source } => {
            tracing::warn!(reason = cause.as_str(), error = %source, "task store unavailable");
            ErrorData::internal_error(
                format!(
                    "the task store cannot take this request now: {cause}; the request was not \
                     carried out; retry in {OUTAGE_RETRY_AFTER_SECONDS} s (reads of existing \
                     tasks may still work)"
                ),
                Some(serde_json::json!({
                    "reason": cause.as_str(),
                    "retryAfterSeconds": OUTAGE_RETRY_AFTER_SECONDS,
                })),
            )
        }
        other => {
            tracing::error!(error = %other, "task store error");
            ErrorData::internal_error("the task store failed this request; try again", None)
        }
    }
}

impl Gateway {
    /// Builds a gateway over `engine`. The MRTR signing key comes from the
    /// store (sealed with the engine's store key), so every instance on one
    /// store accepts the others' states.
    pub async fn new(engine: Engine, transport: TransportKind) -> Result<Self, SealError> {
        let key = seal::shared_secret(
            &**engine.store(),
            &engine.config().store_key,
            "mrtr-request-state",
        )
        .await?;
        Ok(Self {
            engine,
            transport,
            sealer: Arc::new(
                RequestStateCodec::try_new(key).map_err(|e| StoreError::Corrupt {
                    task: "secrets/mrtr-request-state".to_owned(),
                    reason: e.to_string(),
                })?,
            ),
            info: Implementation::new("agentgate", env!("CARGO_PKG_VERSION")),
            instructions: None,
            guard: None,
        })
    }

    /// Enforces `limits` (see [`super::limits`]). Without this call the
    /// gateway enforces none, which suits embedded and benchmark use.
    pub fn with_limits(mut self, limits: Limits) -> Self {
        if let Some(max) = limits.max_ttl {
            for spec in self.engine.tools().iter() {
                if spec.policy.ttl.is_none_or(|ttl| ttl > max) {
                    // Said once at start: the tool's tasks expire (fail)
                    // sooner than the tool was built for.
                    tracing::warn!(
                        tool = %spec.tool.name,
                        max_ttl_seconds = max.as_secs(),
                        "the tool's task TTL is longer than limits.max_ttl_seconds; its tasks get \
                         the shorter TTL"
                    );
                }
            }
        }
        self.guard = Some(Arc::new(Guard::new(limits, self.engine.subscribe())));
        self
    }

    /// The limits enforced, if any.
    pub fn limits(&self) -> Option<&Limits> {
        self.guard.as_deref().map(|g| &g.limits)
    }

    /// Charges one request to the owner's rate limit.
    fn admit(&self, owner: &Owner) -> Result<(), ErrorData> {
        match &self.guard {
            Some(guard) => guard.admit(owner, self.engine.clock().now()),
            None => Ok(()),
        }
    }

    pub(super) fn check_input_size(
        &self,
        responses: &rmcp::model::InputResponses,
    ) -> Result<(), ErrorData> {
        match &self.guard {
            Some(guard) => {
                limits::check_input_size(responses, guard.limits.max_input_response_bytes)
            }
            None => Ok(()),
        }
    }

    /// Names the server in `server/discover` and `initialize`.
    pub fn with_server_info(mut self, info: Implementation, instructions: Option<String>) -> Self {
        self.info = info;
        self.instructions = instructions;
        self
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Where this gateway's clients come from.
    pub fn transport(&self) -> &TransportKind {
        &self.transport
    }

    /// Who owns the tasks this request creates or reads.
    pub fn owner(&self, cx: &RequestContext<RoleServer>) -> Owner {
        match &self.transport {
            TransportKind::Stdio(owner) => owner.clone(),
            TransportKind::Http => cx
                .extensions
                .get::<http::request::Parts>()
                .and_then(|parts| parts.extensions.get::<Principal>())
                .map(|p| p.0.clone())
                .unwrap_or_else(Owner::anonymous),
        }
    }

    /// True when this request may receive a `CreateTaskResult`.
    pub fn wants_task(cx: &RequestContext<RoleServer>) -> bool {
        is_modern(cx) && cx.client_capabilities().is_some_and(|c| c.supports_tasks())
    }

    /// The capabilities this gateway advertises.
    pub fn capabilities() -> ServerCapabilities {
        ServerCapabilities::builder()
            .enable_tools()
            .enable_tasks()
            .build()
    }

    /// The tools this gateway serves, `task_status` included, in a fixed order.
    pub fn tools(&self) -> Vec<Tool> {
        let mut tools: Vec<Tool> = self
            .engine
            .tools()
            .iter()
            .map(|spec| spec.tool.clone())
            .collect();
        tools.push(super::task_status::tool());
        tools.extend(super::task_control::tools());
        tools
    }

    /// Persists a task for `tool` and wakes the scheduler. The row is
    /// committed before this returns, so the id resolves at once.
    pub async fn create_task(
        &self,
        owner: Owner,
        tool: &str,
        args: serde_json::Map<String, Value>,
    ) -> Result<crate::task::TaskRecord, ErrorData> {
        let Some(spec) = self.engine.tools().get(tool) else {
            return Err(unknown_tool(tool));
        };
        let now = self.engine.clock().now();
        let mut ttl = spec.policy.ttl;
        let mut _admission = None;
        if let Some(guard) = &self.guard {
            let max = guard.limits.max_active_tasks;
            if max > 0 {
                // Counted and created under one lock per owner: exact on
                // this instance (across instances, a race can overshoot by
                // the number of instances racing).
                _admission = Some(guard.admission(&owner).await);
                let active = self
                    .engine
                    .store()
                    .count_active(&owner, now)
                    .await
                    .map_err(store_error)?;
                if active >= max {
                    return Err(limits::too_many_tasks(max, active));
                }
            }
            ttl = limits::clamp_ttl(ttl, guard.limits.max_ttl);
        }
        let record = self
            .engine
            .store()
            .create(NewTask {
                id: TaskId::generate(),
                owner,
                tool: tool.to_owned(),
                args: Value::Object(args),
                status_message: Some("queued".to_owned()),
                ttl_ms: ttl.map(|t| t.as_millis() as u64),
                now,
            })
            .await
            .map_err(store_error)?;
        tracing::info!(task = %record.id, tool, "task created");
        self.engine.wake();
        Ok(record)
    }

    /// The `CreateTaskResult` for a freshly created task.
    pub fn task_handle(&self, record: &crate::task::TaskRecord) -> CreateTaskResult {
        let now = self.engine.clock().now();
        CreateTaskResult::new(wire::task_fields(record, self.engine.tools(), now))
    }

    async fn call_job_tool(
        &self,
        request: CallToolRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.to_string();
        let Some(spec) = self.engine.tools().get(&name) else {
            return Err(unknown_tool(&name));
        };
        let owner = self.owner(&cx);
        if let Some(state) = request.request_state.as_deref() {
            // A 2026-07-28 client without tasks answering our MRTR request.
            let id = self.open_request_state(state, &owner, &name)?;
            let responses = request.input_responses.clone().unwrap_or_default();
            self.check_input_size(&responses)?;
            self.engine
                .store()
                .record_input(&owner, &id, responses, self.engine.clock().now())
                .await
                .map_err(store_error)?;
            self.engine.publish(&id);
            self.engine.wake();
            return self.follow_inline(&id, &owner, spec, &cx).await;
        }
        let args = request.arguments.clone().unwrap_or_default();
        if let Err(problem) = spec.check_args(&args) {
            return Ok(CallToolResult::error(vec![ContentBlock::text(format!(
                "Error: invalid arguments for `{name}`: {problem}. The tool's inputSchema in \
                 tools/list shows what it accepts."
            ))])
            .into());
        }
        if Self::wants_task(&cx) {
            let record = self.create_task(owner, &name, args).await?;
            return Ok(self.task_handle(&record).into());
        }
        if !spec.policy.sync_fallback {
            return Err(ErrorData::missing_required_client_capability(
                ClientCapabilities::builder().enable_tasks().build(),
            ));
        }
        let record = self.create_task(owner.clone(), &name, args).await?;
        self.follow_inline(&record.id, &owner, spec, &cx).await
    }

    pub(super) async fn get_visible(
        &self,
        owner: &Owner,
        id: &TaskId,
    ) -> Result<crate::task::TaskRecord, ErrorData> {
        self.engine
            .store()
            .get(owner, id, self.engine.clock().now())
            .await
            .map_err(store_error)?
            .ok_or_else(unknown_task)
    }
}

impl Gateway {
    /// Asks `owner`'s task to cancel and tells everyone who must know: the
    /// step running it here, local waiters, the scheduler.
    pub(super) async fn cancel(&self, owner: &Owner, id: &TaskId) -> Result<(), ErrorData> {
        self.engine
            .store()
            .request_cancel(owner, id, self.engine.clock().now())
            .await
            .map_err(store_error)?;
        self.engine.interrupt(id);
        self.engine.publish(id);
        self.engine.wake();
        Ok(())
    }
}

pub(crate) fn is_modern(cx: &RequestContext<RoleServer>) -> bool {
    cx.protocol_version()
        .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str())
}

fn unknown_tool(name: &str) -> ErrorData {
    ErrorData::invalid_params(
        format!("unknown tool `{name}`; tools/list shows the tools this server offers"),
        None,
    )
}

impl ServerHandler for Gateway {
    fn get_info(&self) -> ServerConfig {
        let mut config =
            ServerConfig::new(Self::capabilities()).with_server_info(self.info.clone());
        if let Some(instructions) = &self.instructions {
            config = config.with_instructions(instructions.clone());
        }
        config
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
        cx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        self.admit(&self.owner(&cx))?;
        Ok(ListToolsResult::with_all_items(self.tools()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.tools().into_iter().find(|t| t.name == name)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.admit(&self.owner(&cx))?;
        match &*request.name {
            super::task_status::NAME => return self.task_status(request, cx).await.map(Into::into),
            super::task_control::ANSWER => {
                return self.task_answer(request, cx).await.map(Into::into);
            }
            super::task_control::CANCEL => {
                return self.task_cancel(request, cx).await.map(Into::into);
            }
            _ => {}
        }
        self.call_job_tool(request, cx).await
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        self.engine.metrics().task_get();
        let owner = self.owner(&cx);
        self.admit(&owner)?;
        let id = TaskId::from_client(request.task_id);
        let now = self.engine.clock().now();
        let tools = self.engine.tools();
        let detailed = match &self.guard {
            None => wire::to_detailed_task(&self.get_visible(&owner, &id).await?, tools, now)?,
            Some(guard) => match guard.polls.poll(&owner, &id, now) {
                Poll::Cached(record) => wire::to_detailed_task(&record, tools, now)?,
                Poll::TooFast { interval, polls } => {
                    return Err(guard.too_fast(&id, interval, polls));
                }
                Poll::Read(ticket) => {
                    // Rendered once: the answer also says how long to keep it.
                    let record = self.get_visible(&owner, &id).await?;
                    let detailed = wire::to_detailed_task(&record, tools, now)?;
                    let interval = detailed.task.poll_interval_ms.map(Duration::from_millis);
                    guard.polls.remember(&record, interval, now, ticket);
                    detailed
                }
            },
        };
        Ok(GetTaskResult::new(detailed))
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let owner = self.owner(&cx);
        self.admit(&owner)?;
        self.check_input_size(&request.input_responses)?;
        let id = TaskId::from_client(request.task_id);
        let ack = self
            .engine
            .store()
            .record_input(
                &owner,
                &id,
                request.input_responses,
                self.engine.clock().now(),
            )
            .await
            .map_err(store_error)?;
        if !ack.accepted.is_empty() {
            self.engine.publish(&id);
            if ack.complete {
                self.engine.wake();
            }
        }
        Ok(())
    }

    fn accepted_subscription_filter(
        &self,
        _requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        // Tools never change, so no list-change category is accepted; task
        // ids travel outside rmcp's filter (see `listen`).
        Some(SubscriptionFilter::new())
    }

    async fn listen(&self, subscription: SubscriptionContext) -> Result<(), ErrorData> {
        self.admit(&self.owner(subscription.request_context()))?;
        self.push_task_status(subscription.request_context().clone())
            .await;
        subscription.cancelled().await;
        Ok(())
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let owner = self.owner(&cx);
        self.admit(&owner)?;
        let id = TaskId::from_client(request.task_id);
        self.cancel(&owner, &id).await
    }
}
