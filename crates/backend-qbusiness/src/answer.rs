//! What the tool returns: everything ChatSync said, nothing dropped.
//!
//! The first text block is upstream's `Qbiz response: <systemMessage>`, byte
//! for byte, so existing prompts keep working. `structuredContent` (declared
//! by [`StructuredAnswer`]'s JSON Schema as the tool's `outputSchema`) holds
//! the same text as `result`, as upstream's does, and carries the ids
//! needed to continue the conversation, every citation with the answer
//! segments it supports, and failed attachments. Each cited URL is also a
//! `resource_link` content block.

use aws_sdk_qbusiness::operation::chat_sync::ChatSyncOutput;
use rmcp::model::{CallToolResult, ContentBlock, Resource};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::review::ReviewForm;

/// ChatSync's cap on `systemMessage`, in characters.
pub const ANSWER_CAP: usize = 2048;

/// How the call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
// The name the tool's published `outputSchema` has always used for it.
#[schemars(rename = "Outcome")]
pub enum QueryOutcome {
    /// Q Business answered.
    Answered,
    /// A plugin action was approved and executed; `answer` is Q's report.
    ActionExecuted,
    /// A plugin action was declined or cancelled: nothing was executed.
    ActionNotExecuted,
    /// The user declined to sign in to the plugin.
    SignInDeclined,
    /// The user said they signed in, but Q Business still asked for the
    /// sign-in (see the answer's text).
    SignInNotSeen,
}

/// The tool's `structuredContent`: upstream's exact text as `result` (what
/// the upstream server's FastMCP output schema, `{result: string}`, holds),
/// beside everything agentgate adds. A client written against upstream's
/// typed output reads `result` as before.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
// The name the tool's published `outputSchema` has always used for it.
#[schemars(rename = "Answer")]
pub struct StructuredAnswer {
    /// Upstream's text: `Qbiz response: <answer>`, or `Error: …` on a
    /// failed call (then the only field).
    pub result: String,
    #[serde(flatten)]
    pub answer: Answer,
}

/// The structured content of a failed call: upstream's `Error: …` text as
/// `result`, and nothing else.
pub fn error_result(text: String) -> CallToolResult {
    let mut result = CallToolResult::error(vec![ContentBlock::text(text.clone())]);
    result.structured_content = Some(serde_json::json!({ "result": text }));
    result
}

/// What ChatSync answered, as the tool reports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
// Flattened into [`StructuredAnswer`], which has the published name.
#[schemars(rename = "AnswerFields")]
#[serde(rename_all = "camelCase")]
pub struct Answer {
    pub outcome: QueryOutcome,
    /// Q Business's answer (`systemMessage`).
    pub answer: String,
    /// True when the answer is at ChatSync's 2048-character cap and may be cut off.
    pub answer_at_cap: bool,
    /// Pass as `conversation_id` to follow up.
    pub conversation_id: Option<String>,
    /// Pass as `parent_message_id` to follow up.
    pub system_message_id: Option<String>,
    pub user_message_id: Option<String>,
    pub citations: Vec<Citation>,
    pub failed_attachments: Vec<FailedAttachment>,
    /// The plugin action that was proposed, when there was one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action_review: Option<ReviewForm>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Citation {
    pub number: Option<i32>,
    pub title: Option<String>,
    pub url: Option<String>,
    pub snippet: Option<String>,
    pub document_id: Option<String>,
    pub index_id: Option<String>,
    pub datasource_id: Option<String>,
    /// RFC 3339.
    pub updated_at: Option<String>,
    /// The parts of the answer this source supports.
    pub segments: Vec<Segment>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Segment {
    /// Character offsets into `answer`.
    pub begin_offset: Option<i32>,
    pub end_offset: Option<i32>,
    /// `answer` between the offsets.
    pub text: Option<String>,
    pub snippet_excerpt: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FailedAttachment {
    pub name: Option<String>,
    pub status: Option<String>,
    pub attachment_id: Option<String>,
    pub error_code: Option<String>,
    pub error_message: Option<String>,
}

fn slice_chars(text: &str, begin: Option<i32>, end: Option<i32>) -> Option<String> {
    let begin = usize::try_from(begin?).ok()?;
    let end = usize::try_from(end?).ok()?;
    (begin <= end && end <= text.chars().count())
        .then(|| text.chars().skip(begin).take(end - begin).collect())
}

impl Answer {
    /// Everything in a ChatSync response.
    pub fn from_output(output: &ChatSyncOutput, outcome: QueryOutcome) -> Self {
        let answer = output.system_message().unwrap_or_default().to_owned();
        let citations = output
            .source_attributions()
            .iter()
            .flatten()
            .map(|s| Citation {
                number: s.citation_number(),
                title: s.title().map(str::to_owned),
                url: s.url().map(str::to_owned),
                snippet: s.snippet().map(str::to_owned),
                document_id: s.document_id().map(str::to_owned),
                index_id: s.index_id().map(str::to_owned),
                datasource_id: s.datasource_id().map(str::to_owned),
                updated_at: s.updated_at().and_then(|d| {
                    d.fmt(aws_sdk_qbusiness::primitives::DateTimeFormat::DateTime)
                        .ok()
                }),
                segments: s
                    .text_message_segments()
                    .iter()
                    .map(|seg| Segment {
                        begin_offset: seg.begin_offset(),
                        end_offset: seg.end_offset(),
                        text: slice_chars(&answer, seg.begin_offset(), seg.end_offset()),
                        snippet_excerpt: seg
                            .snippet_excerpt()
                            .and_then(|e| e.text())
                            .map(str::to_owned),
                    })
                    .collect(),
            })
            .collect();
        let failed_attachments = output
            .failed_attachments()
            .iter()
            .map(|a| FailedAttachment {
                name: a.name().map(str::to_owned),
                status: a.status().map(|s| s.as_str().to_owned()),
                attachment_id: a.attachment_id().map(str::to_owned),
                error_code: a
                    .error()
                    .and_then(|e| e.error_code())
                    .map(|c| c.as_str().to_owned()),
                error_message: a.error().and_then(|e| e.error_message()).map(str::to_owned),
            })
            .collect();
        Self {
            outcome,
            answer_at_cap: answer.chars().count() >= ANSWER_CAP,
            answer,
            conversation_id: output.conversation_id().map(str::to_owned),
            system_message_id: output.system_message_id().map(str::to_owned),
            user_message_id: output.user_message_id().map(str::to_owned),
            citations,
            failed_attachments,
            action_review: None,
        }
    }

    /// The MCP result: upstream's text first, then notes, one
    /// `resource_link` per cited URL, and the structured answer.
    pub fn into_result(self) -> CallToolResult {
        let upstream_text = format!("Qbiz response: {}", self.answer);
        let mut content = vec![ContentBlock::text(upstream_text.clone())];
        let mut notes = Vec::new();
        match self.outcome {
            QueryOutcome::ActionNotExecuted => {
                notes.push("The proposed plugin action was NOT executed (declined).".to_owned());
            }
            QueryOutcome::SignInDeclined => notes.push(
                "The plugin needed a sign-in that was declined; nothing was done with it."
                    .to_owned(),
            ),
            QueryOutcome::Answered | QueryOutcome::ActionExecuted | QueryOutcome::SignInNotSeen => {
            }
        }
        if self.answer_at_cap {
            notes.push(format!(
                "The answer reached ChatSync's {ANSWER_CAP}-character limit and may be cut off; \
                 ask a narrower follow-up with conversation_id and parent_message_id."
            ));
        }
        if !self.citations.is_empty() {
            let sources: Vec<String> = self
                .citations
                .iter()
                .map(|c| {
                    format!(
                        "[{}] {}{}",
                        c.number
                            .map(|n| n.to_string())
                            .unwrap_or_else(|| "-".into()),
                        c.title.as_deref().unwrap_or("untitled"),
                        c.url
                            .as_deref()
                            .map(|u| format!(" <{u}>"))
                            .unwrap_or_default()
                    )
                })
                .collect();
            notes.push(format!("Sources:\n{}", sources.join("\n")));
        }
        if let (Some(conversation), Some(message)) =
            (&self.conversation_id, &self.system_message_id)
        {
            notes.push(format!(
                "To follow up, pass conversation_id={conversation} and parent_message_id={message}."
            ));
        }
        if !notes.is_empty() {
            content.push(ContentBlock::text(notes.join("\n\n")));
        }
        let mut seen = std::collections::BTreeSet::new();
        for citation in &self.citations {
            if let Some(url) = &citation.url
                && seen.insert(url.clone())
            {
                let mut link = Resource::new(
                    url.clone(),
                    citation.title.clone().unwrap_or_else(|| url.clone()),
                );
                link.description = citation.snippet.clone();
                content.push(ContentBlock::resource_link(link));
            }
        }
        let structured = serde_json::to_value(StructuredAnswer {
            result: upstream_text,
            answer: self,
        })
        .unwrap_or_default();
        let mut result = CallToolResult::structured(structured);
        result.content = content;
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_at_chatsyncs_cap_is_flagged_and_explained() {
        let long = "a".repeat(ANSWER_CAP);
        let output = ChatSyncOutput::builder()
            .system_message(long.clone())
            .conversation_id("c".repeat(36))
            .system_message_id("m".repeat(36))
            .build();
        let answer = Answer::from_output(&output, QueryOutcome::Answered);
        assert!(answer.answer_at_cap);
        let result = answer.into_result();
        let texts: Vec<String> = result
            .content
            .iter()
            .filter_map(|c| c.as_text().map(|t| t.text.clone()))
            .collect();
        assert_eq!(texts[0], format!("Qbiz response: {long}"));
        assert!(texts[1].contains("2048-character limit"), "{texts:?}");
        assert_eq!(
            result.structured_content.expect("structured")["answerAtCap"],
            true
        );
    }

    /// Issue 32: `structuredContent.result` is upstream's text, on an
    /// answer and on an error, and the output schema declares it.
    #[test]
    fn structured_content_holds_upstreams_text_as_result() {
        let output = ChatSyncOutput::builder()
            .system_message("Ten days.")
            .conversation_id("c".repeat(36))
            .build();
        let result = Answer::from_output(&output, QueryOutcome::Answered).into_result();
        let structured = result.structured_content.expect("structured");
        assert_eq!(structured["result"], "Qbiz response: Ten days.");
        assert_eq!(structured["answer"], "Ten days.");
        assert_eq!(structured["conversationId"], "c".repeat(36));

        let failed = error_result("Error: Query cannot be empty".to_owned());
        assert_eq!(failed.is_error, Some(true));
        assert_eq!(
            failed.structured_content,
            Some(serde_json::json!({"result": "Error: Query cannot be empty"}))
        );

        let schema = serde_json::to_value(schemars::schema_for!(StructuredAnswer)).expect("schema");
        assert_eq!(schema["title"], "Answer");
        assert_eq!(schema["properties"]["result"]["type"], "string");
        assert!(
            schema["required"]
                .as_array()
                .is_some_and(|r| r.contains(&"result".into()) && r.contains(&"answer".into())),
            "{schema}"
        );
    }

    #[test]
    fn a_short_answer_is_not_flagged() {
        let output = ChatSyncOutput::builder().system_message("short").build();
        assert!(!Answer::from_output(&output, QueryOutcome::Answered).answer_at_cap);
    }
}
