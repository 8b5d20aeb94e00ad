//! The fixture's `ServerHandler`: the conformance catalogue ([`Everything`])
//! next to agentgate's [`Gateway`], which serves the SEP-2663 task fixtures as
//! jobs on our engine and store.
//!
//! `tools/call` goes to `greet` (synchronous by design), then the MRTR round of
//! `test_tool_with_task`, then the catalogue, and otherwise to the gateway,
//! which also answers `task_status` and unknown tools. `tasks/*` go to the
//! gateway.

use std::sync::Arc;

use agentgate_core::mcp::Gateway;
use rmcp::{
    ErrorData, RoleServer, ServerHandler,
    model::{
        CacheScope, CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams,
        ClientCapabilities, CompleteRequestParams, CompleteResult, ContentBlock, ElicitRequest,
        ElicitRequestParams, GetPromptRequestParams, GetPromptResponse, GetTaskParams,
        GetTaskResult, Implementation, InputRequest, InputRequests, InputRequiredResult,
        ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, ListToolsResult,
        PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse, ServerConfig,
        SubscriptionFilter, Tool, UpdateTaskParams,
    },
    service::{RequestContext, SubscriptionContext},
};
use serde_json::{Value, json};

use crate::everything::{CACHE_TTL_MS, Everything, merge_capabilities};

/// The conformance fixture server. Cheap to clone: the Streamable HTTP
/// service calls its factory per request (or per legacy session), so all
/// state lives behind shared handles.
#[derive(Debug, Clone)]
pub(crate) struct Fixture {
    everything: Arc<Everything>,
    gateway: Gateway,
}

impl Fixture {
    pub(crate) fn new(gateway: Gateway) -> Self {
        Self {
            everything: Arc::new(Everything::new()),
            gateway,
        }
    }

    /// Every tool the fixture serves, in `tools/list` order.
    fn tools(&self) -> Vec<Tool> {
        let mut tools = self.everything.tools();
        tools.push(greet_tool());
        tools.extend(self.gateway.tools());
        tools
    }

    /// SEP-2663 MRTR composition: round 1 asks for a name without creating
    /// anything; round 2 creates a durable task that greets it.
    async fn tool_with_task(
        &self,
        request: CallToolRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if !Gateway::wants_task(&cx) {
            return Err(ErrorData::missing_required_client_capability(
                ClientCapabilities::builder().enable_tasks().build(),
            ));
        }
        let name = request
            .input_responses
            .as_ref()
            .and_then(|r| r.get("user_name"))
            .filter(|r| r.get("action").and_then(Value::as_str) == Some("accept"))
            .and_then(|r| r.get("content")?.get("name")?.as_str())
            .map(str::to_owned);
        let Some(name) = name else {
            let schema = json!({
                "type": "object",
                "properties": {"name": {"type": "string"}},
                "required": ["name"]
            });
            let requested_schema = serde_json::from_value(schema)
                .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
            let mut requests = InputRequests::new();
            requests.insert(
                "user_name".to_owned(),
                InputRequest::Elicitation(ElicitRequest::new(
                    ElicitRequestParams::FormElicitationParams {
                        meta: None,
                        message: "What is your name?".to_owned(),
                        requested_schema,
                    },
                )),
            );
            return Ok(InputRequiredResult::from_input_requests(requests).into());
        };
        let owner = self.gateway.owner(&cx);
        let mut args = serde_json::Map::new();
        args.insert("user_name".to_owned(), Value::String(name));
        let record = self
            .gateway
            .create_task(owner, "test_tool_with_task", args)
            .await?;
        Ok(self.gateway.task_handle(&record).into())
    }
}

fn greet_tool() -> Tool {
    let schema = json!({
        "type": "object",
        "properties": {"name": {"type": "string"}},
        "required": ["name"]
    });
    let Value::Object(schema) = schema else {
        unreachable!("a JSON object literal")
    };
    Tool::new(
        "greet",
        "Synchronous greeting (SEP-2663 fixture): never becomes a task.",
        Arc::new(schema),
    )
}

fn greet(request: &CallToolRequestParams) -> CallToolResult {
    match request
        .arguments
        .as_ref()
        .and_then(|a| a.get("name"))
        .and_then(Value::as_str)
    {
        Some(name) => CallToolResult::success(vec![ContentBlock::text(format!("Hello, {name}!"))]),
        None => CallToolResult::error(vec![ContentBlock::text(
            "Error: field `name` (string) is required",
        )]),
    }
}

impl ServerHandler for Fixture {
    fn get_info(&self) -> ServerConfig {
        let mut capabilities = Gateway::capabilities();
        merge_capabilities(&mut capabilities, &self.everything.capabilities());
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new(
                "agentgate-conformance-fixture",
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions("agentgate fixture for the MCP conformance suite")
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.tools().into_iter().find(|t| t.name == name)
    }

    fn supported_protocol_versions(
        &self,
    ) -> std::borrow::Cow<'static, [rmcp::model::ProtocolVersion]> {
        self.gateway.supported_protocol_versions()
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        self.gateway.get_task(request, cx).await
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.gateway.update_task(request, cx).await
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.gateway.cancel_task(request, cx).await
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools())
            .with_ttl_ms(CACHE_TTL_MS)
            .with_cache_scope(CacheScope::Public))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        match request.name.as_ref() {
            "greet" => return Ok(greet(&request).into()),
            "test_tool_with_task" => return self.tool_with_task(request, cx).await,
            _ => {}
        }
        if self.everything.tool(&request.name).is_some() {
            let name = request.name.to_string();
            return self
                .everything
                .call_tool(request, cx)
                .await
                .unwrap_or_else(|| {
                    Err(ErrorData::internal_error(
                        format!("catalogue tool `{name}` has no handler"),
                        None,
                    ))
                });
        }
        self.gateway.call_tool(request, cx).await
    }

    async fn list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
        cx: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        self.everything.list_prompts(request, cx).await
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        self.everything.get_prompt(request, cx).await
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        cx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        self.everything.list_resources(request, cx).await
    }

    async fn list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
        cx: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        self.everything.list_resource_templates(request, cx).await
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        self.everything.read_resource(request, cx).await
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        self.everything.complete(request, cx).await
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        self.everything.accepted_subscription_filter(requested)
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        // One stream carries both: the catalogue's list changes and the
        // gateway's task status (when the request named task ids).
        let tasks = self
            .gateway
            .push_task_status(context.request_context().clone());
        let (_, listened) = tokio::join!(tasks, self.everything.listen(context));
        listened
    }
}
