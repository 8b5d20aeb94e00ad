//! The gateway: agentgate's rmcp `ServerHandler`.
//!
//! Every request is answered from the store, scoped to the caller's owner, so
//! any process on the same store can serve any request. Whether `tools/call`
//! returns a task handle is decided per request: only a request at protocol
//! 2026-07-28 or later that declares the tasks extension gets one (rmcp would
//! also honour a legacy session's `initialize` capabilities, which the
//! extension forbids, so the gate is ours).

use std::borrow::Cow;
use std::sync::{Arc, OnceLock};

use agentgate_backend::{Owner, TaskId};
use rmcp::ServerHandler;
use rmcp::model::RequestStateCodec;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ContentBlock,
    CreateTaskResult, ErrorData, GetTaskParams, GetTaskResult, Implementation, ListToolsResult,
    PaginatedRequestParams, ProtocolVersion, ServerCapabilities, ServerConfig, SubscriptionFilter,
    Tool, UpdateTaskParams,
};
use rmcp::service::{NotificationContext, RequestContext, RoleServer, SubscriptionContext};
use serde_json::Value;
use tokio::sync::watch;

use super::error::GatewayError;
use super::limits::{self, Guard, Limits};
use super::render;
use crate::auth::Principal;
use crate::engine::{TaskQuota, Tasks};
use crate::registry::ToolRegistry;
use crate::store::StoreError;
use crate::store::seal::{self, SealError};
use crate::task::TaskRecord;

/// How often a legacy session's tool-change watcher checks that its
/// session is still open.
const SESSION_CHECK: std::time::Duration = std::time::Duration::from_secs(30);

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
    pub(super) tasks: Tasks,
    transport: TransportKind,
    pub(super) sealer: Arc<RequestStateCodec>,
    info: Implementation,
    instructions: Option<String>,
    /// Per-principal limits; `None` (the default) enforces none.
    guard: Option<Arc<Guard>>,
    /// The backends told of each request made with an OAuth access token
    /// (see [`Gateway::enter`]).
    backends: Arc<[Arc<dyn agentgate_backend::Backend>]>,
    /// A legacy session's view of the tools served, taken at `initialize`
    /// so a change before `notifications/initialized` is told too. Not
    /// shared: each session has its own clone of the gateway.
    session_tools: OnceLock<watch::Receiver<Arc<ToolRegistry>>>,
    /// Set once the session's tool-change watcher runs (a client may send
    /// `notifications/initialized` more than once).
    announcing: OnceLock<()>,
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway")
            .field("transport", &self.transport)
            .field("info", &self.info)
            .finish_non_exhaustive()
    }
}

impl Gateway {
    /// Builds a gateway over `tasks` (see [`Runtime::gateway`]). The MRTR
    /// signing key comes from the store (sealed with the engine's store
    /// key), so every instance on one store accepts the others' states.
    ///
    /// [`Runtime::gateway`]: crate::runtime::Runtime::gateway
    pub(crate) async fn new(tasks: Tasks, transport: TransportKind) -> Result<Self, SealError> {
        let key = seal::shared_secret(
            &**tasks.engine().store(),
            &tasks.engine().config().store_key,
            "mrtr-request-state",
        )
        .await?;
        Ok(Self {
            tasks,
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
            backends: Arc::from(Vec::new()),
            session_tools: OnceLock::new(),
            announcing: OnceLock::new(),
        })
    }

    /// Enforces `limits` (see [`super::limits`]). Without this call the
    /// gateway enforces none, which suits embedded and benchmark use.
    pub fn with_limits(mut self, limits: Limits) -> Self {
        if let Some(max) = limits.max_ttl {
            for spec in self.tasks.tools().iter() {
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
        self.guard = Some(Arc::new(Guard::new(
            limits,
            self.tasks.engine().subscribe(),
        )));
        self
    }

    /// Tells `backends` of every request made with an OAuth access token
    /// ([`agentgate_backend::Backend::principal_request`]).
    pub fn with_backends(mut self, backends: Arc<[Arc<dyn agentgate_backend::Backend>]>) -> Self {
        self.backends = backends;
        self
    }

    /// The limits enforced, if any.
    pub fn limits(&self) -> Option<&Limits> {
        self.guard.as_deref().map(|g| &g.limits)
    }

    /// Charges one request to the owner's rate limit.
    pub(super) fn admit(&self, owner: &Owner) -> Result<(), ErrorData> {
        match &self.guard {
            Some(guard) => guard.admit(owner, self.tasks.now()),
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

    /// The task service this gateway serves.
    pub fn tasks(&self) -> &Tasks {
        &self.tasks
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
                .map(|p| p.owner.clone())
                .unwrap_or_else(Owner::anonymous),
        }
    }

    /// Who is calling, admitted under the limits. A request made with an
    /// OAuth access token is then shown to every backend, which may renew
    /// the principal's own upstream identity with it before the request is
    /// served (Q Business's identity-aware sessions): the only moment the
    /// token is at hand.
    pub(super) async fn enter(&self, cx: &RequestContext<RoleServer>) -> Result<Owner, ErrorData> {
        let owner = self.owner(cx);
        self.admit(&owner)?;
        if let TransportKind::Http = self.transport
            && let Some(token) = cx
                .extensions
                .get::<http::request::Parts>()
                .and_then(|parts| parts.extensions.get::<Principal>())
                .and_then(|p| p.token.as_ref())
        {
            for backend in self.backends.iter() {
                backend.principal_request(&owner, token).await;
            }
        }
        Ok(owner)
    }

    /// True when this request may receive a `CreateTaskResult`.
    pub fn wants_task(cx: &RequestContext<RoleServer>) -> bool {
        at_least_2026_07_28(cx) && cx.client_capabilities().is_some_and(|c| c.supports_tasks())
    }

    /// The MCP protocol versions this gateway speaks, oldest first.
    pub fn protocol_versions() -> [ProtocolVersion; 3] {
        [
            ProtocolVersion::V_2025_06_18,
            ProtocolVersion::V_2025_11_25,
            ProtocolVersion::V_2026_07_28,
        ]
    }

    /// The capabilities this gateway advertises.
    pub fn capabilities() -> ServerCapabilities {
        ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_tasks()
            .build()
    }

    /// The tools `tools/list` shows, `task_status` included, in a fixed
    /// order: a backend that is not set up has its tools left out.
    pub fn tools(&self) -> Vec<Tool> {
        let mut tools: Vec<Tool> = self
            .tasks
            .tools()
            .listed()
            .map(|spec| spec.tool.clone())
            .collect();
        tools.extend(super::builtin::tools().iter().cloned());
        tools
    }

    /// The caps this gateway's `[limits]` put on the tasks it creates.
    pub(super) fn quota(&self) -> TaskQuota {
        self.guard
            .as_ref()
            .map(|guard| TaskQuota {
                max_live: guard.limits.max_active_tasks,
                max_ttl: guard.limits.max_ttl,
                max_stored_tasks: guard.limits.max_stored_tasks,
                max_stored_bytes: guard.limits.max_stored_bytes,
            })
            .unwrap_or_default()
    }

    /// Creates a task for `tool` (see [`Tasks::create`](crate::engine::Tasks::create)) under this
    /// gateway's limits. The row is committed before this returns, so the id
    /// resolves at once.
    pub async fn create_task(
        &self,
        owner: Owner,
        tool: &str,
        args: serde_json::Map<String, Value>,
    ) -> Result<TaskRecord, ErrorData> {
        let tools = self.tasks.tools();
        let spec = tools
            .get(tool)
            .ok_or_else(|| GatewayError::UnknownTool(tool.to_owned()))?;
        Ok(self.tasks.create(owner, spec, args, &self.quota()).await?)
    }

    /// The `CreateTaskResult` for a freshly created task.
    pub fn task_handle(&self, record: &TaskRecord) -> CreateTaskResult {
        let now = self.tasks.now();
        CreateTaskResult::new(render::task_fields(record, &self.tasks.tools(), now))
    }

    async fn call_job_tool(
        &self,
        request: CallToolRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.to_string();
        let tools = self.tasks.tools();
        let spec = tools
            .get(&name)
            .ok_or_else(|| GatewayError::UnknownTool(name.clone()))?;
        let owner = self.owner(&cx);
        if let Some(state) = request.request_state.as_deref() {
            // A 2026-07-28 client without tasks answering our MRTR request.
            let id = self.open_request_state(state, &owner, &name)?;
            let responses = request.input_responses.clone().unwrap_or_default();
            self.check_input_size(&responses)?;
            self.tasks.answer(&owner, &id, responses).await?;
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
            let record = self.tasks.create(owner, spec, args, &self.quota()).await?;
            return Ok(self.task_handle(&record).into());
        }
        if !spec.policy.sync_fallback {
            return Err(super::error::tasks_extension_required(None));
        }
        let record = self
            .tasks
            .create(owner.clone(), spec, args, &self.quota())
            .await?;
        self.follow_inline(&record.id, &owner, spec, &cx).await
    }
}

/// Whether the session negotiated protocol 2026-07-28 or later, where MRTR
/// and the tasks extension live.
pub(crate) fn at_least_2026_07_28(cx: &RequestContext<RoleServer>) -> bool {
    cx.protocol_version()
        .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str())
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
        Cow::Owned(Self::protocol_versions().to_vec())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        cx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        self.enter(&cx).await?;
        Ok(ListToolsResult::with_all_items(self.tools()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        match self.tasks.tools().get(name) {
            Some(spec) => Some(spec.tool.clone()),
            None => self.tools().into_iter().find(|t| t.name == name),
        }
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.enter(&cx).await?;
        if super::builtin::NAMES.contains(&&*request.name) {
            let caller = super::builtin::Caller {
                tasks: &self.tasks,
                owner: self.owner(&cx),
                max_input_bytes: self
                    .guard
                    .as_ref()
                    .map(|guard| guard.limits.max_input_response_bytes),
                cancelled: cx.ct.clone(),
            };
            return super::builtin::call(caller, request).await.map(Into::into);
        }
        self.call_job_tool(request, cx).await
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        self.tasks.engine().metrics().task_get();
        let owner = self.enter(&cx).await?;
        let id = TaskId::from_client(request.task_id);
        let now = self.tasks.now();
        let tools = self.tasks.tools();
        let read = || async {
            let record = self.tasks.get(&owner, &id).await?;
            let detailed = render::to_detailed_task(&record, &tools, now)?;
            Ok((record, detailed))
        };
        let detailed = match &self.guard {
            None => read().await?.1,
            Some(guard) => guard.poll_task(&owner, &id, now, read).await?,
        };
        Ok(GetTaskResult::new(detailed))
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let owner = self.enter(&cx).await?;
        self.check_input_size(&request.input_responses)?;
        let id = TaskId::from_client(request.task_id);
        self.tasks
            .answer(&owner, &id, request.input_responses)
            .await?;
        Ok(())
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        // Tools change (an MCP server behind us listed others); prompts and
        // resources are not served. Task ids travel outside rmcp's filter
        // (see `listen`).
        let mut accepted = SubscriptionFilter::new();
        accepted.tools_list_changed = requested.tools_list_changed.filter(|on| *on);
        Some(accepted)
    }

    async fn listen(&self, subscription: SubscriptionContext) -> Result<(), ErrorData> {
        let request = subscription.request_context();
        let owner = self.owner(request);
        // Held while the stream is open: one of the principal's listens.
        let _slot = match &self.guard {
            Some(guard) => {
                let tasks = self.listen_task_ids(request).map_or(0, |ids| ids.0.len());
                Some(guard.open_listen(&owner, tasks, self.tasks.now())?)
            }
            None => None,
        };
        let tools = async {
            if subscription.accepted().tools_list_changed == Some(true) {
                let mut tools = self.tasks.engine().watch_tools();
                while tools.changed().await.is_ok() {
                    if subscription
                        .sink()
                        .notify_tool_list_changed()
                        .await
                        .is_err()
                    {
                        break;
                    }
                }
            }
        };
        // Either may end first (no task ids; a stream that cannot be
        // written); the listen lasts until the client leaves.
        let pushes = async {
            tokio::join!(self.push_task_status(request.clone()), tools);
            std::future::pending::<()>().await;
        };
        tokio::select! {
            () = subscription.cancelled() => {}
            () = pushes => {}
        }
        Ok(())
    }

    async fn on_initialized(&self, cx: NotificationContext<RoleServer>) {
        // A legacy session (≤ 2025-11-25) hears of tool changes on its own
        // stream, as the capability `tools.listChanged` promises. The
        // watcher lives as long as the session: it ends when a notification
        // cannot be sent or, checked every SESSION_CHECK, the session has
        // closed, so there is at most one per open session (and sessions
        // are capped per principal and in all).
        if self.announcing.set(()).is_err() {
            return;
        }
        let Some(mut tools) = self.session_tools.get().cloned() else {
            return;
        };
        let peer = cx.peer;
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    changed = tools.changed() => {
                        if changed.is_err() || peer.notify_tool_list_changed().await.is_err() {
                            return;
                        }
                    }
                    () = tokio::time::sleep(SESSION_CHECK) => {
                        if peer.is_transport_closed() {
                            return;
                        }
                    }
                }
            }
        });
    }

    async fn initialize(
        &self,
        request: rmcp::model::InitializeRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::InitializeResult, ErrorData> {
        // Each one starts a session: charged like any request.
        self.enter(&cx).await?;
        let _ = self.session_tools.set(self.tasks.engine().watch_tools());
        cx.peer.set_peer_info(request.clone());
        self.negotiate_initialize(&request)
    }

    async fn discover(
        &self,
        cx: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::DiscoverResult, ErrorData> {
        self.enter(&cx).await?;
        Ok(rmcp::model::DiscoverResult::from_server_info(
            self.supported_protocol_versions().into_owned(),
            self.get_info(),
        ))
    }

    async fn on_custom_request(
        &self,
        request: rmcp::model::CustomRequest,
        cx: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CustomResult, ErrorData> {
        // The 2025-11-25 task requests, renamed by the HTTP layer or the
        // stdio guard (`tasks_2025`); no other custom method is served (a
        // client's own use of those names arrives as `RESERVED`).
        match request.method.strip_prefix(super::tasks_2025::PREFIX) {
            Some(method) => {
                let method = method.to_owned();
                self.serve_2025(&method, request, cx).await
            }
            None => Err(GatewayError::UnknownMethod(request.method).into()),
        }
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let owner = self.enter(&cx).await?;
        let id = TaskId::from_client(request.task_id);
        Ok(self.tasks.cancel(&owner, &id).await?)
    }
}
