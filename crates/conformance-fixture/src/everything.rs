//! The "everything" half of the conformance fixture.
//!
//! The official MCP conformance suite (`@modelcontextprotocol/conformance`)
//! drives a server through a fixed catalogue of tools, prompts, resources and
//! completions whose names and shapes are part of each scenario's contract
//! (`test_simple_text`, `test_prompt_with_arguments`, `test://static-text`, …).
//! This module serves that catalogue for the protocol revision 2026-07-28:
//!
//! * the content-type tools (`tools-call-*`), progress and the stateless
//!   diagnostics used by `server-stateless` (`test_missing_capability`,
//!   `test_logging_tool`, `test_streaming_elicitation`, the list-change
//!   triggers);
//! * the SEP-2322 multi round-trip (MRTR) tools and prompt
//!   (`input-required-result-*`), whose `requestState` is HMAC-sealed with a
//!   per-process key, bound to the originating method and name, and expires;
//! * prompts, resources, a resource template and `completion/complete`;
//! * the `subscriptions/listen` registry the list-change triggers notify.
//!
//! It deliberately does not implement the SEP-2663 task fixtures (`greet`,
//! `slow_compute`, …): those run on agentgate's durable engine and are added
//! next to this module by [`crate::server::Fixture`].
//!
//! Nothing here sends server-to-client requests: the 2026-07-28 wire forbids
//! them, so every client input goes through `InputRequiredResult`, and an
//! input kind is only requested when the request's `clientCapabilities`
//! declare it (otherwise the call fails with `-32021`).

// Sampling, roots and logging are deprecated by SEP-2577 but are still what
// the conformance scenarios exercise through MRTR and `notifications/message`.
#![allow(deprecated)]

use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use rmcp::{
    ErrorData, RoleServer,
    model::{
        AudioContent, CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities,
        CompleteRequestParams, CompleteResult, CompletionInfo, ContentBlock, CreateMessageRequest,
        CreateMessageRequestParams, CreateMessageResult, ElicitRequest, ElicitRequestParams,
        ElicitResult, ElicitationAction, ElicitationCapability, ElicitationSchema,
        GetPromptRequestParams, GetPromptResponse, GetPromptResult, InputRequest, InputRequests,
        InputRequiredResult, InputResponses, JsonObject, ListPromptsResult,
        ListResourceTemplatesResult, ListResourcesResult, ListRootsRequest, ListRootsResult,
        LoggingLevel, LoggingMessageNotificationParam, PaginatedRequestParams,
        ProgressNotificationParam, Prompt, PromptArgument, PromptMessage, PromptsCapability,
        ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Reference,
        RequestStateCodec, Resource, ResourceContents, ResourceTemplate, ResourcesCapability, Role,
        RootsCapabilities, SamplingCapability, SamplingMessage, SamplingMessageContentBlock,
        SealOptions, ServerCapabilities, SubscriptionFilter, Tool, ToolsCapability,
    },
    service::{RequestContext, SubscriptionContext, SubscriptionSendError, SubscriptionSink},
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// `ttlMs` put on the cacheable results this module builds. Everything served
/// here is static, so every caller may share the cached copy (`public`).
pub const CACHE_TTL_MS: u64 = 60_000;

/// How long a sealed `requestState` stays redeemable.
const REQUEST_STATE_TTL: Duration = Duration::from_secs(10 * 60);

/// A 1x1 PNG, base64.
const PNG_BASE64: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGNgaPgPAAIDAYAkYfWXAAAAAElFTkSuQmCC";
/// Eight samples of 8 kHz, 8-bit mono silence as a WAV file, base64.
const WAV_BASE64: &str = "UklGRiwAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQgAAACAgICAgICAgA==";

/// URI template of the one resource template (`resources-templates-read`).
const TEMPLATE_URI: &str = "test://template/{id}/data";

/// Tools that take no arguments, in `tools/list` order.
const PLAIN_TOOLS: &[(&str, &str)] = &[
    ("test_simple_text", "Returns a single text content block"),
    ("test_image_content", "Returns a PNG image content block"),
    ("test_audio_content", "Returns a WAV audio content block"),
    (
        "test_embedded_resource",
        "Returns an embedded text resource",
    ),
    (
        "test_multiple_content_types",
        "Returns text, image and embedded-resource content together",
    ),
    (
        "test_error_handling",
        "Always fails with a tool execution error (isError: true)",
    ),
    (
        "test_tool_with_progress",
        "Reports 0/100, 50/100 and 100/100 progress when the request carries a progressToken",
    ),
    (
        "test_logging_tool",
        "Emits notifications/message only when the request sets _meta logLevel",
    ),
    (
        "test_missing_capability",
        "Requires the sampling client capability; rejects with -32021 without it",
    ),
    (
        "test_streaming_elicitation",
        "Answers with an input_required result holding one elicitation request",
    ),
    (
        "test_trigger_tool_change",
        "Sends notifications/tools/list_changed to open subscriptions/listen streams",
    ),
    (
        "test_trigger_prompt_change",
        "Sends notifications/prompts/list_changed to open subscriptions/listen streams",
    ),
    (
        "test_input_required_result_elicitation",
        "MRTR: asks for the user's name through elicitation (SEP-2322)",
    ),
    (
        "test_input_required_result_sampling",
        "MRTR: asks the client's model a question through sampling (SEP-2322)",
    ),
    (
        "test_input_required_result_list_roots",
        "MRTR: asks for the client's roots (SEP-2322)",
    ),
    (
        "test_input_required_result_request_state",
        "MRTR: round-trips an integrity-protected requestState (SEP-2322)",
    ),
    (
        "test_input_required_result_multiple_inputs",
        "MRTR: asks for elicitation, sampling and roots in one round (SEP-2322)",
    ),
    (
        "test_input_required_result_multi_round",
        "MRTR: two rounds of elicitation with an evolving requestState (SEP-2322)",
    ),
    (
        "test_input_required_result_tampered_state",
        "MRTR: rejects a requestState that fails integrity verification (SEP-2322)",
    ),
    (
        "test_input_required_result_capabilities",
        "MRTR: only asks for the input kinds the client declared (SEP-2322)",
    ),
];

/// Name of the prompt that answers `prompts/get` with an `InputRequiredResult`.
const MRTR_PROMPT: &str = "test_input_required_result_prompt";

/// The conformance catalogue (see the module docs).
#[derive(Debug, Clone)]
pub struct Everything {
    /// Seals and opens MRTR `requestState`; the key is random per process, so
    /// a state minted by a previous run (or another replica) is rejected.
    state_codec: RequestStateCodec,
    /// Open `subscriptions/listen` streams, by a local id.
    subscriptions: Arc<Mutex<HashMap<u64, SubscriptionSink>>>,
    next_subscription: Arc<AtomicU64>,
}

impl Default for Everything {
    fn default() -> Self {
        Self::new()
    }
}

/// One client input kind an MRTR tool may ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum InputKind {
    Elicitation,
    Sampling,
    Roots,
}

/// What an MRTR round seals into `requestState`.
#[derive(Debug, Serialize, Deserialize)]
struct SealedState {
    /// The step the next retry continues from.
    step: u32,
    /// Answers gathered in earlier rounds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    name: Option<String>,
}

impl Everything {
    pub fn new() -> Self {
        let key: [u8; 32] = rand::random();
        Self {
            state_codec: RequestStateCodec::new_unchecked(key.to_vec()),
            subscriptions: Arc::default(),
            next_subscription: Arc::default(),
        }
    }

    /// The tools this module serves, in a deterministic order.
    pub fn tools(&self) -> Vec<Tool> {
        let mut tools: Vec<Tool> = PLAIN_TOOLS
            .iter()
            .map(|(name, description)| {
                Tool::new(*name, *description, schema(json!({ "type": "object" })))
            })
            .collect();
        tools.push(custom_header_tool());
        tools.push(json_schema_2020_12_tool());
        tools
    }

    /// The definition of one of this module's tools, for
    /// `ServerHandler::get_tool` (rmcp validates `Mcp-Param-*` headers
    /// against it).
    pub fn tool(&self, name: &str) -> Option<Tool> {
        self.tools().into_iter().find(|tool| tool.name == name)
    }

    /// `tools/call`: `Some(..)` when `request.name` is one of this module's
    /// tools, `None` otherwise.
    pub async fn call_tool(
        &self,
        request: CallToolRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Option<Result<CallToolResponse, ErrorData>> {
        let args = request.arguments.as_ref();
        let responses = request.input_responses.as_ref();
        let state = request.request_state.as_deref();
        let name = request.name.as_ref();
        let outcome = match name {
            "test_simple_text" => Ok(text_result("This is a simple text response for testing.")),
            "test_image_content" => {
                Ok(complete(vec![ContentBlock::image(PNG_BASE64, "image/png")]))
            }
            "test_audio_content" => Ok(complete(vec![ContentBlock::Audio(AudioContent::new(
                WAV_BASE64,
                "audio/wav",
            ))])),
            "test_embedded_resource" => Ok(complete(vec![ContentBlock::resource(
                ResourceContents::text(
                    "This is an embedded resource content.",
                    "test://embedded-resource",
                )
                .with_mime_type("text/plain"),
            )])),
            "test_multiple_content_types" => Ok(complete(vec![
                ContentBlock::text("Multiple content types test:"),
                ContentBlock::image(PNG_BASE64, "image/png"),
                ContentBlock::resource(
                    ResourceContents::text(
                        r#"{"test":"data","value":123}"#,
                        "test://mixed-content-resource",
                    )
                    .with_mime_type("application/json"),
                ),
            ])),
            "test_error_handling" => Ok(CallToolResult::error(vec![ContentBlock::text(
                "This tool intentionally returns an error for testing",
            )])
            .into()),
            "test_tool_with_progress" => Ok(progress_tool(&cx).await),
            "test_logging_tool" => Ok(logging_tool(&cx).await),
            "test_missing_capability" => require_inputs(&cx, &[InputKind::Sampling])
                .map(|()| text_result("The client declared the sampling capability")),
            "test_streaming_elicitation" => require_inputs(&cx, &[InputKind::Elicitation])
                .and_then(|()| {
                    Ok(input_required(
                        [(
                            "streaming_elicitation",
                            elicitation("Provide a value", "value")?,
                        )],
                        None,
                    ))
                }),
            "test_trigger_tool_change" => {
                self.broadcast(|sink| async move { sink.notify_tool_list_changed().await })
                    .await;
                Ok(text_result("Tool list change triggered"))
            }
            "test_trigger_prompt_change" => {
                self.broadcast(|sink| async move { sink.notify_prompt_list_changed().await })
                    .await;
                Ok(text_result("Prompt list change triggered"))
            }
            "test_custom_header" => string_arg(args, "value").map(text_result),
            "json_schema_2020_12_tool" => optional_string_arg(args, "name")
                .map(|who| text_result(format!("Hello, {}!", who.unwrap_or("world")))),
            "test_input_required_result_elicitation" => mrtr_elicitation(&cx, responses),
            "test_input_required_result_sampling" => mrtr_sampling(&cx, responses),
            "test_input_required_result_list_roots" => mrtr_list_roots(&cx, responses),
            "test_input_required_result_request_state"
            | "test_input_required_result_tampered_state" => {
                self.mrtr_request_state(&cx, name, responses, state)
            }
            "test_input_required_result_multiple_inputs" => {
                self.mrtr_multiple_inputs(&cx, name, responses, state)
            }
            "test_input_required_result_multi_round" => {
                self.mrtr_multi_round(&cx, name, responses, state)
            }
            "test_input_required_result_capabilities" => mrtr_capabilities(&cx, responses),
            _ => return None,
        };
        Some(outcome)
    }

    /// `prompts/list`.
    pub async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let prompts = vec![
            Prompt::new(
                "test_simple_prompt",
                Some("A simple prompt without arguments"),
                None,
            ),
            Prompt::new(
                "test_prompt_with_arguments",
                Some("A prompt that substitutes two required arguments"),
                Some(vec![
                    PromptArgument::new("arg1")
                        .with_description("First test argument")
                        .with_required(true),
                    PromptArgument::new("arg2")
                        .with_description("Second test argument")
                        .with_required(true),
                ]),
            ),
            Prompt::new(
                "test_prompt_with_embedded_resource",
                Some("A prompt that embeds the resource named by resourceUri"),
                Some(vec![
                    PromptArgument::new("resourceUri")
                        .with_description("URI of the resource to embed")
                        .with_required(true),
                ]),
            ),
            Prompt::new(
                "test_prompt_with_image",
                Some("A prompt that includes image content"),
                None,
            ),
            Prompt::new(
                MRTR_PROMPT,
                Some("A prompt that first asks for context through elicitation (SEP-2322)"),
                None,
            ),
        ];
        Ok(ListPromptsResult::with_all_items(prompts)
            .with_ttl_ms(CACHE_TTL_MS)
            .with_cache_scope(rmcp::model::CacheScope::Public))
    }

    /// `prompts/get`.
    pub async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let args = request.arguments.as_ref();
        let result = match request.name.as_str() {
            "test_simple_prompt" => GetPromptResult::new(vec![PromptMessage::new_text(
                Role::User,
                "This is a simple prompt for testing.",
            )])
            .with_description("A simple prompt without arguments"),
            "test_prompt_with_arguments" => {
                let arg1 = string_arg(args, "arg1")?;
                let arg2 = string_arg(args, "arg2")?;
                GetPromptResult::new(vec![PromptMessage::new_text(
                    Role::User,
                    format!("Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"),
                )])
                .with_description("A prompt with arguments")
            }
            "test_prompt_with_embedded_resource" => {
                let uri = string_arg(args, "resourceUri")?;
                GetPromptResult::new(vec![
                    PromptMessage::new(
                        Role::User,
                        ContentBlock::resource(
                            ResourceContents::text("Embedded resource content for testing.", uri)
                                .with_mime_type("text/plain"),
                        ),
                    ),
                    PromptMessage::new_text(
                        Role::User,
                        "Please process the embedded resource above.",
                    ),
                ])
                .with_description("A prompt with an embedded resource")
            }
            "test_prompt_with_image" => GetPromptResult::new(vec![
                PromptMessage::new(Role::User, ContentBlock::image(PNG_BASE64, "image/png")),
                PromptMessage::new_text(Role::User, "Please analyze the image above."),
            ])
            .with_description("A prompt with an image"),
            MRTR_PROMPT => {
                require_inputs(&cx, &[InputKind::Elicitation])?;
                let Some(answer) = elicit_answer(request.input_responses.as_ref(), "user_context")
                else {
                    return Ok(input_required(
                        [(
                            "user_context",
                            elicitation("What context should the prompt use?", "context")?,
                        )],
                        None,
                    ));
                };
                let context = answer.string_field("context").unwrap_or("(none provided)");
                GetPromptResult::new(vec![PromptMessage::new_text(
                    Role::User,
                    format!("Prompt built from the elicited context: {context}"),
                )])
                .with_description("A prompt built from elicited context")
            }
            other => {
                return Err(ErrorData::invalid_params(
                    format!("unknown prompt `{other}` (field `name`)"),
                    Some(json!({ "name": other })),
                ));
            }
        };
        Ok(result.into())
    }

    /// `resources/list`.
    pub async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        Ok(ListResourcesResult::with_all_items(vec![
            Resource::new("test://static-text", "static-text")
                .with_title("Static Text Resource")
                .with_description("A static text resource for testing")
                .with_mime_type("text/plain"),
            Resource::new("test://static-binary", "static-binary")
                .with_title("Static Binary Resource")
                .with_description("A static binary resource (PNG image) for testing")
                .with_mime_type("image/png"),
        ])
        .with_ttl_ms(CACHE_TTL_MS)
        .with_cache_scope(rmcp::model::CacheScope::Public))
    }

    /// `resources/templates/list`.
    pub async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(ListResourceTemplatesResult::with_all_items(vec![
            ResourceTemplate::new(TEMPLATE_URI, "template")
                .with_title("Resource Template")
                .with_description("A resource template with parameter substitution")
                .with_mime_type("application/json"),
        ])
        .with_ttl_ms(CACHE_TTL_MS)
        .with_cache_scope(rmcp::model::CacheScope::Public))
    }

    /// `resources/read`. Unknown URIs fail with `resource_not_found` (which
    /// rmcp reports as `-32602` to 2026-07-28 peers) carrying `data.uri`.
    pub async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let uri = request.uri.as_str();
        let contents = match uri {
            "test://static-text" => {
                ResourceContents::text("This is the content of the static text resource.", uri)
                    .with_mime_type("text/plain")
            }
            "test://static-binary" => {
                ResourceContents::blob(PNG_BASE64, uri).with_mime_type("image/png")
            }
            _ => match template_id(uri) {
                Some(id) => ResourceContents::text(
                    json!({ "id": id, "templateTest": true, "data": format!("Data for ID: {id}") })
                        .to_string(),
                    uri,
                )
                .with_mime_type("application/json"),
                None => {
                    return Err(ErrorData::resource_not_found(
                        format!("resource not found: {uri}"),
                        Some(json!({ "uri": uri })),
                    ));
                }
            },
        };
        Ok(ReadResourceResult::new(vec![contents])
            .with_ttl_ms(CACHE_TTL_MS)
            .with_cache_scope(rmcp::model::CacheScope::Public)
            .into())
    }

    /// `completion/complete`: prefix-filtered suggestions for the prompt
    /// arguments and the template's `{id}`.
    pub async fn complete(
        &self,
        request: CompleteRequestParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        let candidates: &[&str] = match &request.r#ref {
            Reference::Prompt(prompt) => {
                match (prompt.name.as_str(), request.argument.name.as_str()) {
                    ("test_prompt_with_arguments", "arg1") => {
                        &["paris", "park", "party", "test-value"]
                    }
                    ("test_prompt_with_arguments", "arg2") => &["world", "wonder", "test-value"],
                    ("test_prompt_with_embedded_resource", "resourceUri") => {
                        &["test://static-text", "test://static-binary"]
                    }
                    ("test_prompt_with_arguments" | "test_prompt_with_embedded_resource", _) => &[],
                    (other, _) => {
                        return Err(ErrorData::invalid_params(
                            format!("unknown prompt `{other}` (field `ref.name`)"),
                            None,
                        ));
                    }
                }
            }
            Reference::Resource(template) => {
                if template.uri != TEMPLATE_URI {
                    return Err(ErrorData::invalid_params(
                        format!(
                            "unknown resource template `{}` (field `ref.uri`)",
                            template.uri
                        ),
                        None,
                    ));
                }
                if request.argument.name == "id" {
                    &["1", "2", "3", "123"]
                } else {
                    &[]
                }
            }
            _ => {
                return Err(ErrorData::invalid_params(
                    "unsupported completion reference type (field `ref.type`)",
                    None,
                ));
            }
        };
        let prefix = request.argument.value.as_str();
        let values: Vec<String> = candidates
            .iter()
            .filter(|value| value.starts_with(prefix))
            .map(|value| (*value).to_owned())
            .collect();
        let info = CompletionInfo::with_all_values(values)
            .map_err(|error| ErrorData::internal_error(error, None))?;
        Ok(CompleteResult::new(info))
    }

    /// Capabilities this module needs; merge them into the server's with
    /// [`merge_capabilities`].
    pub fn capabilities(&self) -> ServerCapabilities {
        let mut capabilities = ServerCapabilities::default();
        let mut tools = ToolsCapability::default();
        tools.list_changed = Some(true);
        capabilities.tools = Some(tools);
        let mut prompts = PromptsCapability::default();
        prompts.list_changed = Some(true);
        capabilities.prompts = Some(prompts);
        capabilities.resources = Some(ResourcesCapability::default());
        capabilities.completions = Some(JsonObject::new());
        capabilities.logging = Some(JsonObject::new());
        capabilities
    }

    /// `ServerHandler::accepted_subscription_filter`: every requested
    /// category is accepted; rmcp then narrows it to the advertised
    /// capabilities (tools and prompts `listChanged`).
    pub fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(requested.clone())
    }

    /// `ServerHandler::listen`: keeps the stream registered until the client
    /// goes away, so the list-change triggers can reach it.
    pub async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let id = self.next_subscription.fetch_add(1, Ordering::Relaxed);
        self.sinks().insert(id, context.sink().clone());
        context.cancelled().await;
        self.sinks().remove(&id);
        Ok(())
    }

    fn sinks(&self) -> std::sync::MutexGuard<'_, HashMap<u64, SubscriptionSink>> {
        self.subscriptions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Sends one notification to every open subscription. The sink drops
    /// categories a stream did not subscribe to; closed streams are forgotten.
    async fn broadcast<F, Fut>(&self, send: F)
    where
        F: Fn(SubscriptionSink) -> Fut,
        Fut: Future<Output = Result<(), SubscriptionSendError>>,
    {
        let sinks: Vec<(u64, SubscriptionSink)> = self
            .sinks()
            .iter()
            .map(|(id, sink)| (*id, sink.clone()))
            .collect();
        for (id, sink) in sinks {
            match send(sink).await {
                Ok(()) | Err(SubscriptionSendError::NotificationNotAccepted(_)) => {}
                Err(error) => {
                    tracing::debug!(%error, subscription = id, "dropping subscription");
                    self.sinks().remove(&id);
                }
            }
        }
    }

    /// `test_input_required_result_request_state` and `…_tampered_state`:
    /// round 1 asks for a confirmation and seals the step; the retry must echo
    /// a state that opens, or the call fails with `-32602`.
    fn mrtr_request_state(
        &self,
        cx: &RequestContext<RoleServer>,
        tool: &str,
        responses: Option<&InputResponses>,
        state: Option<&str>,
    ) -> Result<CallToolResponse, ErrorData> {
        require_inputs(cx, &[InputKind::Elicitation])?;
        let opened = state
            .map(|sealed| self.open_state(tool, sealed))
            .transpose()?;
        if opened.is_some()
            && let Some(answer) = elicit_answer(responses, "confirm")
        {
            let confirmed = answer.bool_field("ok").unwrap_or(false);
            return Ok(text_result(format!(
                "Confirmed: state-ok (ok = {confirmed})"
            )));
        }
        let sealed = self.seal_state(
            tool,
            &SealedState {
                step: 1,
                name: None,
            },
        )?;
        Ok(input_required(
            [("confirm", elicitation_bool("Please confirm", "ok")?)],
            Some(sealed),
        ))
    }

    /// `test_input_required_result_multiple_inputs`: one round asking for all
    /// three input kinds; only the still-missing ones are asked again.
    fn mrtr_multiple_inputs(
        &self,
        cx: &RequestContext<RoleServer>,
        tool: &str,
        responses: Option<&InputResponses>,
        state: Option<&str>,
    ) -> Result<CallToolResponse, ErrorData> {
        require_inputs(
            cx,
            &[
                InputKind::Elicitation,
                InputKind::Sampling,
                InputKind::Roots,
            ],
        )?;
        let opened = state
            .map(|sealed| self.open_state(tool, sealed))
            .transpose()?;
        let name = elicit_answer(responses, "user_name");
        let greeting = sampling_answer(responses, "greeting");
        let roots = roots_answer(responses, "client_roots");
        if opened.is_some()
            && let (Some(name), Some(greeting), Some(roots)) = (&name, &greeting, &roots)
        {
            return Ok(text_result(format!(
                "All inputs received: name = {}, greeting = {}, roots = [{}]",
                name.string_field("name").unwrap_or("(none)"),
                greeting,
                roots.join(", ")
            )));
        }
        let mut requests = Vec::new();
        if opened.is_none() || name.is_none() {
            requests.push(("user_name", elicitation("What is your name?", "name")?));
        }
        if opened.is_none() || greeting.is_none() {
            requests.push(("greeting", sampling("Generate a greeting", 50)));
        }
        if opened.is_none() || roots.is_none() {
            requests.push(("client_roots", list_roots()));
        }
        let sealed = self.seal_state(
            tool,
            &SealedState {
                step: 1,
                name: None,
            },
        )?;
        Ok(input_required(requests, Some(sealed)))
    }

    /// `test_input_required_result_multi_round`: step 1 asks for a name,
    /// step 2 (with the name sealed into the new state) for a colour.
    fn mrtr_multi_round(
        &self,
        cx: &RequestContext<RoleServer>,
        tool: &str,
        responses: Option<&InputResponses>,
        state: Option<&str>,
    ) -> Result<CallToolResponse, ErrorData> {
        require_inputs(cx, &[InputKind::Elicitation])?;
        let opened = state
            .map(|sealed| self.open_state(tool, sealed))
            .transpose()?;
        let step1 = || -> Result<CallToolResponse, ErrorData> {
            let sealed = self.seal_state(
                tool,
                &SealedState {
                    step: 1,
                    name: None,
                },
            )?;
            Ok(input_required(
                [("step1", elicitation("Step 1: What is your name?", "name")?)],
                Some(sealed),
            ))
        };
        let step2 = |name: String| -> Result<CallToolResponse, ErrorData> {
            let sealed = self.seal_state(
                tool,
                &SealedState {
                    step: 2,
                    name: Some(name),
                },
            )?;
            Ok(input_required(
                [(
                    "step2",
                    elicitation("Step 2: What is your favorite color?", "color")?,
                )],
                Some(sealed),
            ))
        };
        match opened {
            None => step1(),
            Some(SealedState { step: 1, .. }) => match elicit_answer(responses, "step1") {
                Some(answer) => step2(answer.string_field("name").unwrap_or("friend").to_owned()),
                None => step1(),
            },
            Some(SealedState { step: 2, name }) => match elicit_answer(responses, "step2") {
                Some(answer) => Ok(text_result(format!(
                    "Multi-round flow complete: {} likes {}",
                    name.as_deref().unwrap_or("friend"),
                    answer
                        .string_field("color")
                        .unwrap_or("no colour in particular")
                ))),
                None => step2(name.unwrap_or_else(|| "friend".to_owned())),
            },
            Some(SealedState { step, .. }) => Err(ErrorData::invalid_params(
                format!("requestState names an unknown step {step} (field `requestState`)"),
                None,
            )),
        }
    }

    /// Binds a sealed state to the tool that minted it.
    fn seal_state(&self, tool: &str, state: &SealedState) -> Result<String, ErrorData> {
        let binding = state_binding(tool);
        self.state_codec
            .seal_json_with(
                state,
                &SealOptions::new()
                    .associated_data(binding.as_bytes())
                    .ttl(REQUEST_STATE_TTL),
            )
            .map_err(|error| ErrorData::internal_error(error.to_string(), None))
    }

    /// Opens an echoed state; every failure (forged, tampered, expired,
    /// minted for another tool) is the same `-32602`.
    fn open_state(&self, tool: &str, sealed: &str) -> Result<SealedState, ErrorData> {
        let binding = state_binding(tool);
        self.state_codec
            .open_json_with(sealed, binding.as_bytes())
            .map_err(|error| {
                tracing::debug!(%error, tool, "rejected requestState");
                ErrorData::invalid_params(
                    "requestState failed integrity verification (field `requestState`)",
                    None,
                )
            })
    }
}

/// Merges `extra` into `base`: absent capabilities are copied over,
/// `listChanged`/`subscribe` flags are OR-ed, and extension maps are united
/// (`base` wins on a key clash).
pub fn merge_capabilities(base: &mut ServerCapabilities, extra: &ServerCapabilities) {
    fn or(a: Option<bool>, b: Option<bool>) -> Option<bool> {
        match (a, b) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(false) || b.unwrap_or(false)),
        }
    }
    fn merge_map<V: Clone>(
        base: &mut Option<std::collections::BTreeMap<String, V>>,
        extra: Option<&std::collections::BTreeMap<String, V>>,
    ) {
        if let Some(extra) = extra {
            let base = base.get_or_insert_with(Default::default);
            for (key, value) in extra {
                base.entry(key.clone()).or_insert_with(|| value.clone());
            }
        }
    }
    if let Some(extra_tools) = &extra.tools {
        let tools = base.tools.get_or_insert_with(Default::default);
        tools.list_changed = or(tools.list_changed, extra_tools.list_changed);
    }
    if let Some(extra_prompts) = &extra.prompts {
        let prompts = base.prompts.get_or_insert_with(Default::default);
        prompts.list_changed = or(prompts.list_changed, extra_prompts.list_changed);
    }
    if let Some(extra_resources) = &extra.resources {
        let resources = base.resources.get_or_insert_with(Default::default);
        resources.list_changed = or(resources.list_changed, extra_resources.list_changed);
        resources.subscribe = or(resources.subscribe, extra_resources.subscribe);
    }
    if base.completions.is_none() {
        base.completions = extra.completions.clone();
    }
    if base.logging.is_none() {
        base.logging = extra.logging.clone();
    }
    merge_map(&mut base.extensions, extra.extensions.as_ref());
    merge_map(&mut base.experimental, extra.experimental.as_ref());
}

// ─── tool bodies ────────────────────────────────────────────────────────────

async fn progress_tool(cx: &RequestContext<RoleServer>) -> CallToolResponse {
    let token = cx.meta.get_progress_token();
    for (progress, message) in [(0.0, "Starting"), (50.0, "Halfway"), (100.0, "Complete")] {
        if let Some(token) = &token {
            let sent = cx
                .peer
                .notify_progress(
                    ProgressNotificationParam::new(token.clone(), progress)
                        .with_total(100.0)
                        .with_message(message),
                )
                .await;
            if let Err(error) = sent {
                tracing::debug!(%error, "progress notification not delivered");
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    text_result("Progress test completed")
}

/// Logs at `info` only when the request asked for `info` or something more
/// verbose; without `_meta` logLevel nothing is emitted (SEP-2575).
async fn logging_tool(cx: &RequestContext<RoleServer>) -> CallToolResponse {
    if matches!(
        cx.meta.log_level(),
        Some(LoggingLevel::Debug | LoggingLevel::Info)
    ) {
        let sent = cx
            .peer
            .notify_logging_message(
                LoggingMessageNotificationParam::new(
                    LoggingLevel::Info,
                    json!("test_logging_tool ran with a requested logLevel"),
                )
                .with_logger("conformance-fixture"),
            )
            .await;
        if let Err(error) = sent {
            tracing::debug!(%error, "log notification not delivered");
        }
    }
    text_result("Logging tool completed")
}

fn mrtr_elicitation(
    cx: &RequestContext<RoleServer>,
    responses: Option<&InputResponses>,
) -> Result<CallToolResponse, ErrorData> {
    require_inputs(cx, &[InputKind::Elicitation])?;
    match elicit_answer(responses, "user_name") {
        Some(answer) if answer.accepted() => Ok(text_result(format!(
            "Hello, {}!",
            answer.string_field("name").unwrap_or("friend")
        ))),
        Some(_) => Ok(text_result("The user declined to give a name")),
        None => Ok(input_required(
            [("user_name", elicitation("What is your name?", "name")?)],
            None,
        )),
    }
}

fn mrtr_sampling(
    cx: &RequestContext<RoleServer>,
    responses: Option<&InputResponses>,
) -> Result<CallToolResponse, ErrorData> {
    require_inputs(cx, &[InputKind::Sampling])?;
    match sampling_answer(responses, "capital_question") {
        Some(text) => Ok(text_result(format!("Sampling response: {text}"))),
        None => Ok(input_required(
            [(
                "capital_question",
                sampling("What is the capital of France?", 100),
            )],
            None,
        )),
    }
}

fn mrtr_list_roots(
    cx: &RequestContext<RoleServer>,
    responses: Option<&InputResponses>,
) -> Result<CallToolResponse, ErrorData> {
    require_inputs(cx, &[InputKind::Roots])?;
    match roots_answer(responses, "client_roots") {
        Some(roots) => Ok(text_result(format!("Client roots: [{}]", roots.join(", ")))),
        None => Ok(input_required([("client_roots", list_roots())], None)),
    }
}

/// Asks only for the input kinds the request's capabilities declare.
fn mrtr_capabilities(
    cx: &RequestContext<RoleServer>,
    responses: Option<&InputResponses>,
) -> Result<CallToolResponse, ErrorData> {
    let declared = declared_inputs(cx);
    let mut requests = Vec::new();
    let mut received = Vec::new();
    for kind in declared {
        match kind {
            InputKind::Elicitation => match elicit_answer(responses, "user_name") {
                Some(_) => received.push("elicitation"),
                None => requests.push(("user_name", elicitation("What is your name?", "name")?)),
            },
            InputKind::Sampling => match sampling_answer(responses, "greeting") {
                Some(_) => received.push("sampling"),
                None => requests.push(("greeting", sampling("Generate a greeting", 50))),
            },
            InputKind::Roots => match roots_answer(responses, "client_roots") {
                Some(_) => received.push("roots"),
                None => requests.push(("client_roots", list_roots())),
            },
        }
    }
    if !requests.is_empty() {
        return Ok(input_required(requests, None));
    }
    if received.is_empty() {
        Ok(text_result(
            "The client declared no capability an input request could use",
        ))
    } else {
        Ok(text_result(format!(
            "Capability-aware flow complete: {}",
            received.join(", ")
        )))
    }
}

// ─── MRTR helpers ───────────────────────────────────────────────────────────

fn declared_inputs(cx: &RequestContext<RoleServer>) -> Vec<InputKind> {
    let capabilities = cx.client_capabilities().unwrap_or_default();
    let mut kinds = Vec::new();
    if capabilities.elicitation.is_some() {
        kinds.push(InputKind::Elicitation);
    }
    if capabilities.sampling.is_some() {
        kinds.push(InputKind::Sampling);
    }
    if capabilities.roots.is_some() {
        kinds.push(InputKind::Roots);
    }
    kinds
}

/// Fails with `-32021` naming every kind in `needed` the client did not
/// declare in this request's `clientCapabilities`.
fn require_inputs(cx: &RequestContext<RoleServer>, needed: &[InputKind]) -> Result<(), ErrorData> {
    let declared = declared_inputs(cx);
    let mut missing = ClientCapabilities::default();
    let mut any_missing = false;
    for kind in needed.iter().filter(|kind| !declared.contains(kind)) {
        any_missing = true;
        match kind {
            InputKind::Elicitation => missing.elicitation = Some(ElicitationCapability::default()),
            InputKind::Sampling => missing.sampling = Some(SamplingCapability::default()),
            InputKind::Roots => missing.roots = Some(RootsCapabilities::default()),
        }
    }
    if any_missing {
        Err(ErrorData::missing_required_client_capability(missing))
    } else {
        Ok(())
    }
}

/// An `InputRequiredResult` as the response of any of the three methods
/// allowed to return one.
fn input_required<'a, T: From<InputRequiredResult>>(
    requests: impl IntoIterator<Item = (&'a str, InputRequest)>,
    state: Option<String>,
) -> T {
    let requests: InputRequests = requests
        .into_iter()
        .map(|(key, request)| (key.to_owned(), request))
        .collect();
    InputRequiredResult::new(Some(requests), state).into()
}

/// A one-field form elicitation asking for the string `field`.
fn elicitation(message: &str, field: &str) -> Result<InputRequest, ErrorData> {
    let schema = ElicitationSchema::builder()
        .required_string_property(field, |property| property)
        .build()
        .map_err(|error| ErrorData::internal_error(error, None))?;
    Ok(form(message, schema))
}

/// A one-field form elicitation asking for the boolean `field`.
fn elicitation_bool(message: &str, field: &str) -> Result<InputRequest, ErrorData> {
    let schema = ElicitationSchema::builder()
        .required_bool_property(field, |property| property)
        .build()
        .map_err(|error| ErrorData::internal_error(error, None))?;
    Ok(form(message, schema))
}

fn form(message: &str, requested_schema: ElicitationSchema) -> InputRequest {
    InputRequest::Elicitation(ElicitRequest::new(
        ElicitRequestParams::FormElicitationParams {
            meta: None,
            message: message.to_owned(),
            requested_schema,
        },
    ))
}

fn sampling(prompt: &str, max_tokens: u32) -> InputRequest {
    InputRequest::CreateMessage(CreateMessageRequest::new(CreateMessageRequestParams::new(
        vec![SamplingMessage::user_text(prompt)],
        max_tokens,
    )))
}

fn list_roots() -> InputRequest {
    InputRequest::ListRoots(ListRootsRequest::default())
}

/// A usable elicitation answer: the value under `key` parses as an
/// `ElicitResult`. Anything else (absent, a number, a malformed object)
/// counts as missing, so the input is asked for again.
fn elicit_answer(responses: Option<&InputResponses>, key: &str) -> Option<ElicitAnswer> {
    let value = responses?.get(key)?;
    serde_json::from_value::<ElicitResult>(value.clone())
        .ok()
        .map(ElicitAnswer)
}

struct ElicitAnswer(ElicitResult);

impl ElicitAnswer {
    fn accepted(&self) -> bool {
        matches!(self.0.action, ElicitationAction::Accept)
    }

    fn field(&self, name: &str) -> Option<&Value> {
        if !self.accepted() {
            return None;
        }
        self.0.content.as_ref()?.get(name)
    }

    fn string_field(&self, name: &str) -> Option<&str> {
        self.field(name)?.as_str()
    }

    fn bool_field(&self, name: &str) -> Option<bool> {
        self.field(name)?.as_bool()
    }
}

/// The text of a usable sampling answer (a `CreateMessageResult`).
fn sampling_answer(responses: Option<&InputResponses>, key: &str) -> Option<String> {
    let value = responses?.get(key)?;
    let result = serde_json::from_value::<CreateMessageResult>(value.clone()).ok()?;
    let text = result
        .message
        .content
        .into_vec()
        .into_iter()
        .filter_map(|block| match block {
            SamplingMessageContentBlock::Text(text) => Some(text.text),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join(" ");
    Some(text)
}

/// The root URIs of a usable roots answer (a `ListRootsResult`).
fn roots_answer(responses: Option<&InputResponses>, key: &str) -> Option<Vec<String>> {
    let value = responses?.get(key)?;
    let result = serde_json::from_value::<ListRootsResult>(value.clone()).ok()?;
    Some(result.roots.into_iter().map(|root| root.uri).collect())
}

fn state_binding(tool: &str) -> String {
    format!("tools/call\n{tool}")
}

// ─── small helpers ──────────────────────────────────────────────────────────

fn complete(content: Vec<ContentBlock>) -> CallToolResponse {
    CallToolResult::success(content).into()
}

fn text_result(text: impl Into<String>) -> CallToolResponse {
    complete(vec![ContentBlock::text(text)])
}

/// A required string argument; a missing or mistyped one is `-32602` naming
/// the field.
fn string_arg<'a>(args: Option<&'a JsonObject>, field: &str) -> Result<&'a str, ErrorData> {
    match args.and_then(|args| args.get(field)) {
        Some(Value::String(value)) => Ok(value),
        Some(_) => Err(ErrorData::invalid_params(
            format!("argument `{field}` must be a string"),
            Some(json!({ "field": field })),
        )),
        None => Err(ErrorData::invalid_params(
            format!("missing required argument `{field}`"),
            Some(json!({ "field": field })),
        )),
    }
}

/// An optional string argument; a mistyped one is `-32602` naming the field.
fn optional_string_arg<'a>(
    args: Option<&'a JsonObject>,
    field: &str,
) -> Result<Option<&'a str>, ErrorData> {
    match args.and_then(|args| args.get(field)) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(value)) => Ok(Some(value)),
        Some(_) => Err(ErrorData::invalid_params(
            format!("argument `{field}` must be a string"),
            Some(json!({ "field": field })),
        )),
    }
}

/// `{id}` of `test://template/{id}/data`, if `uri` matches the template.
fn template_id(uri: &str) -> Option<&str> {
    let id = uri
        .strip_prefix("test://template/")?
        .strip_suffix("/data")?;
    (!id.is_empty() && !id.contains('/')).then_some(id)
}

/// A JSON object literal as a schema (non-objects become `{}`).
fn schema(value: Value) -> JsonObject {
    match value {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    }
}

/// SEP-2243 custom-header fixture: `value` is mirrored into `Mcp-Param-Value`.
fn custom_header_tool() -> Tool {
    Tool::new(
        "test_custom_header",
        "Echoes `value`, which clients also send as the Mcp-Param-Value header (SEP-2243)",
        schema(json!({
            "type": "object",
            "properties": {
                "value": { "type": "string", "x-mcp-header": "Value" }
            },
            "required": ["value"]
        })),
    )
}

/// SEP-1613/SEP-2106 fixture: an input schema using the 2020-12 vocabulary,
/// which must survive `tools/list` unchanged.
fn json_schema_2020_12_tool() -> Tool {
    Tool::new(
        "json_schema_2020_12_tool",
        "Greets `name`; its input schema exercises JSON Schema 2020-12 keywords",
        schema(json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "$defs": {
                "address": {
                    "$anchor": "addressDef",
                    "type": "object",
                    "properties": {
                        "street": { "type": "string" },
                        "city": { "type": "string" }
                    }
                }
            },
            "properties": {
                "name": { "type": "string" },
                "address": { "$ref": "#/$defs/address" },
                "contactMethod": { "type": "string", "enum": ["phone", "email"] },
                "phone": { "type": "string" },
                "email": { "type": "string" }
            },
            "allOf": [{ "anyOf": [{ "required": ["phone"] }, { "required": ["email"] }] }],
            "if": {
                "properties": { "contactMethod": { "const": "phone" } },
                "required": ["contactMethod"]
            },
            "then": { "required": ["phone"] },
            "else": { "required": ["email"] },
            "additionalProperties": false
        })),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn template_ids_are_single_segments() {
        assert_eq!(template_id("test://template/123/data"), Some("123"));
        assert_eq!(template_id("test://template//data"), None);
        assert_eq!(template_id("test://template/a/b/data"), None);
        assert_eq!(template_id("test://static-text"), None);
    }

    #[test]
    fn request_state_is_bound_to_its_tool_and_tamper_evident() {
        let everything = Everything::new();
        let tool = "test_input_required_result_multi_round";
        let sealed = everything
            .seal_state(
                tool,
                &SealedState {
                    step: 2,
                    name: Some("Alice".into()),
                },
            )
            .expect("sealing a small state");
        let opened = everything
            .open_state(tool, &sealed)
            .expect("own state opens");
        assert_eq!(opened.step, 2);
        assert_eq!(opened.name.as_deref(), Some("Alice"));
        assert!(
            everything
                .open_state(tool, &format!("{sealed}-TAMPERED"))
                .is_err()
        );
        assert!(
            everything
                .open_state("test_input_required_result_request_state", &sealed)
                .is_err()
        );
        assert!(Everything::new().open_state(tool, &sealed).is_err());
    }

    #[test]
    fn merged_capabilities_keep_both_sides() {
        let mut base = ServerCapabilities::builder().enable_tools().build();
        merge_capabilities(&mut base, &Everything::new().capabilities());
        assert_eq!(base.tools.and_then(|tools| tools.list_changed), Some(true));
        assert_eq!(
            base.prompts.and_then(|prompts| prompts.list_changed),
            Some(true)
        );
        assert!(base.resources.is_some());
        assert!(base.completions.is_some());
    }

    #[test]
    fn tool_names_are_unique_and_well_formed() {
        let tools = Everything::new().tools();
        let mut names: Vec<&str> = tools.iter().map(|tool| tool.name.as_ref()).collect();
        assert!(names.iter().all(|name| {
            !name.is_empty()
                && name.len() <= 64
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_./-".contains(c))
        }));
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), tools.len());
    }
}
