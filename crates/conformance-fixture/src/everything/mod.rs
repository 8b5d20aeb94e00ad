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

mod catalogue;
mod listen;
mod mrtr;
mod prompts;
mod resources;

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

use catalogue::*;
use mrtr::*;

/// `ttlMs` put on the cacheable results this module builds. Everything served
/// here is static, so every caller may share the cached copy (`public`).
pub(crate) const CACHE_TTL_MS: u64 = 60_000;

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
pub(crate) struct Everything {
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
    pub(crate) fn new() -> Self {
        let key: [u8; 32] = rand::random();
        Self {
            state_codec: RequestStateCodec::new_unchecked(key.to_vec()),
            subscriptions: Arc::default(),
            next_subscription: Arc::default(),
        }
    }

    /// The tools this module serves, in a deterministic order.
    pub(crate) fn tools(&self) -> Vec<Tool> {
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
    pub(crate) fn tool(&self, name: &str) -> Option<Tool> {
        self.tools().into_iter().find(|tool| tool.name == name)
    }

    /// `tools/call`: `Some(..)` when `request.name` is one of this module's
    /// tools, `None` otherwise.
    pub(crate) async fn call_tool(
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
    /// Capabilities this module needs; merge them into the server's with
    /// [`merge_capabilities`].
    pub(crate) fn capabilities(&self) -> ServerCapabilities {
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
}

/// Merges `extra` into `base`: absent capabilities are copied over,
/// `listChanged`/`subscribe` flags are OR-ed, and extension maps are united
/// (`base` wins on a key clash).
pub(crate) fn merge_capabilities(base: &mut ServerCapabilities, extra: &ServerCapabilities) {
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

#[cfg(test)]
mod tests {
    use super::resources::template_id;
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
