//! Response shapes of the emulated operations, serialized as restJson1 (camelCase keys,
//! timestamps as epoch seconds in JSON numbers), exactly the members the Rust SDK reads.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use super::request::ActionExecution;

/// ChatSync's 200 body.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ChatSyncOutput {
    /// The conversation (new or continued).
    pub conversation_id: String,
    /// The answer; at most 2048 characters.
    pub system_message: String,
    /// Id of the SYSTEM message (the next turn's `parentMessageId`).
    pub system_message_id: String,
    /// Id of the USER message.
    pub user_message_id: String,
    /// Citations; empty when nothing was retrieved.
    pub source_attributions: Vec<SourceAttribution>,
    /// A plugin action waiting for the user's review.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub action_review: Option<ActionReview>,
    /// A plugin that needs the user to sign in first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auth_challenge_request: Option<AuthChallengeRequest>,
    /// Always empty: attachments are accepted but not processed.
    pub failed_attachments: Vec<Value>,
}

/// One cited document.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct SourceAttribution {
    /// Document title.
    pub title: String,
    /// A passage of the document around the cited text.
    pub snippet: String,
    /// Document URL.
    pub url: String,
    /// The number in the `[n]` markers of the answer.
    pub citation_number: i32,
    /// Last update of the document, epoch seconds.
    pub updated_at: i64,
    /// The sentences of the answer that cite this document.
    pub text_message_segments: Vec<TextSegment>,
    /// Stable document id.
    pub document_id: String,
    /// The (single) index of the emulated application.
    pub index_id: String,
    /// The (single) data source of the emulated application.
    pub datasource_id: String,
}

/// A span of `systemMessage` (`beginOffset` inclusive, `endOffset` exclusive, in
/// characters; the corpus is ASCII so bytes and characters agree).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct TextSegment {
    /// First character of the cited sentence.
    pub begin_offset: usize,
    /// One past its last character (before the ` [n]` marker).
    pub end_offset: usize,
    /// The source text the sentence came from.
    pub snippet_excerpt: SnippetExcerpt,
}

/// `snippetExcerpt`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(super) struct SnippetExcerpt {
    /// The excerpt.
    pub text: String,
}

/// `actionReview`: a plugin action the user reviews before it runs.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ActionReview {
    /// The plugin.
    pub plugin_id: String,
    /// `CUSTOM` for the emulator's plugins.
    pub plugin_type: String,
    /// The fields to review, by name.
    pub payload: BTreeMap<String, ActionReviewPayloadField>,
    /// Separator of nested field names (`.`).
    pub payload_field_name_separator: String,
}

/// One reviewable field.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ActionReviewPayloadField {
    /// Label.
    pub display_name: String,
    /// Position in the form.
    pub display_order: i32,
    /// Help text.
    pub display_description: String,
    /// `STRING`, `NUMBER`, `ARRAY` or `BOOLEAN`.
    #[serde(rename = "type")]
    pub field_type: String,
    /// Prefilled value.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<Value>,
    /// Allowed values, when the field is an enumeration.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allowed_values: Option<Vec<AllowedValue>>,
    /// Whether the field must be present in the execution.
    pub required: bool,
}

/// One allowed value of a reviewable field.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct AllowedValue {
    /// The value to send back.
    pub value: Value,
    /// What to show.
    pub display_value: Value,
}

/// `authChallengeRequest`.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct AuthChallengeRequest {
    /// Where the user signs in; its `state` query parameter goes back in
    /// `authChallengeResponse.responseMap.state`.
    pub authorization_url: String,
}

/// One message of ListMessages.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Message {
    /// Message id.
    pub message_id: String,
    /// The text (absent for a USER turn that only carried an action or sign-in).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// Epoch seconds.
    pub time: i64,
    /// `USER` or `SYSTEM`.
    #[serde(rename = "type")]
    pub message_type: &'static str,
    /// Citations (singular key here, unlike ChatSync).
    pub source_attribution: Vec<SourceAttribution>,
    /// The review a SYSTEM message asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub action_review: Option<ActionReview>,
    /// The action a USER message executed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub action_execution: Option<ActionExecution>,
}

/// One conversation of ListConversations.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ConversationSummary {
    /// Conversation id.
    pub conversation_id: String,
    /// The first user message, shortened.
    pub title: String,
    /// Epoch seconds.
    pub start_time: i64,
}
