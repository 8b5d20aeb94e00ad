//! A2A outputs as MCP tool results.
//!
//! Every part of every artifact becomes one content block, in order: text as
//! text; `raw` file bytes as an embedded resource (text when the media type
//! is `text/*` and the bytes are UTF-8, else a base64 blob); a file `url` as
//! a resource link; `data` as its JSON in a text block. `structuredContent`
//! holds `{"task": <the whole A2A task as received>, "data": [...]}` (or
//! `"message"` for a direct reply), so artifact names, metadata, history and
//! anything this mapping does not render are kept.

use base64::Engine as _;
use rmcp::model::{CallToolResult, ContentBlock, Resource, ResourceContents};
use serde_json::{Value, json};

use crate::wire::{Message, Part, TaskSnapshot};

/// Where a part came from, for the URIs of embedded resources.
struct Origin<'a> {
    agent: &'a str,
    task_id: &'a str,
    holder: &'a str,
}

fn part_block(origin: &Origin<'_>, index: usize, part: &Part) -> Option<ContentBlock> {
    if let Some(text) = &part.text {
        return Some(ContentBlock::text(text.clone()));
    }
    let name = if part.filename.is_empty() {
        format!("part-{index}")
    } else {
        part.filename.clone()
    };
    let mime = (!part.media_type.is_empty()).then(|| part.media_type.clone());
    if let Some(raw) = &part.raw {
        let uri = format!(
            "a2a://{}/tasks/{}/{}/{}",
            origin.agent, origin.task_id, origin.holder, name
        );
        let text = mime
            .as_deref()
            .filter(|m| m.starts_with("text/"))
            .and_then(|_| base64::engine::general_purpose::STANDARD.decode(raw).ok())
            .and_then(|bytes| String::from_utf8(bytes).ok());
        let contents = match text {
            Some(text) => ResourceContents::TextResourceContents {
                uri,
                mime_type: mime,
                text,
                meta: None,
            },
            None => ResourceContents::BlobResourceContents {
                uri,
                mime_type: mime,
                blob: raw.clone(),
                meta: None,
            },
        };
        return Some(ContentBlock::resource(contents));
    }
    if let Some(url) = &part.url {
        let mut link = Resource::new(url.clone(), name);
        if let Some(mime) = mime {
            link = link.with_mime_type(mime);
        }
        return Some(ContentBlock::resource_link(link));
    }
    part.data
        .as_ref()
        .map(|data| ContentBlock::text(data.to_string()))
}

fn data_of(holder: &str, parts: &[Part]) -> Vec<Value> {
    parts
        .iter()
        .filter_map(|p| p.data.as_ref())
        .map(|data| json!({"from": holder, "data": data}))
        .collect()
}

/// A COMPLETED task: its artifacts (or, with none, the agent's last status
/// message).
pub fn completed(agent: &str, snapshot: &TaskSnapshot) -> CallToolResult {
    let task = &snapshot.task;
    let mut content = Vec::new();
    let mut data = Vec::new();
    for artifact in &task.artifacts {
        let origin = Origin {
            agent,
            task_id: &task.id,
            holder: &format!("artifacts/{}", artifact.artifact_id),
        };
        content.extend(
            artifact
                .parts
                .iter()
                .enumerate()
                .filter_map(|(i, p)| part_block(&origin, i, p)),
        );
        data.extend(data_of(&artifact.artifact_id, &artifact.parts));
    }
    if content.is_empty()
        && let Some(message) = &task.status.message
    {
        let origin = Origin {
            agent,
            task_id: &task.id,
            holder: "status",
        };
        content.extend(
            message
                .parts
                .iter()
                .enumerate()
                .filter_map(|(i, p)| part_block(&origin, i, p)),
        );
        data.extend(data_of("status", &message.parts));
    }
    if content.is_empty() {
        content.push(ContentBlock::text(format!(
            "The A2A agent `{agent}` completed the task without output."
        )));
    }
    let mut result = CallToolResult::success(content);
    result.structured_content = Some(json!({"task": snapshot.raw, "data": data}));
    result
}

/// A direct reply (`SendMessageResponse.message`): no task was created.
pub fn direct(agent: &str, message: &Message, raw: &Value) -> CallToolResult {
    let origin = Origin {
        agent,
        task_id: "-",
        holder: "message",
    };
    let mut content: Vec<ContentBlock> = message
        .parts
        .iter()
        .enumerate()
        .filter_map(|(i, p)| part_block(&origin, i, p))
        .collect();
    if content.is_empty() {
        content.push(ContentBlock::text(format!(
            "The A2A agent `{agent}` answered with an empty message."
        )));
    }
    let mut result = CallToolResult::success(content);
    result.structured_content = Some(json!({
        "message": raw,
        "data": data_of("message", &message.parts),
    }));
    result
}

/// A task that ended without the answer (FAILED, REJECTED), or that needs
/// what MCP cannot ask for: `isError`, saying so and with the agent's words.
pub fn unsuccessful(agent: &str, what: &str, snapshot: &TaskSnapshot) -> CallToolResult {
    let said = snapshot
        .task
        .status
        .message
        .as_ref()
        .map(Message::text)
        .filter(|t| !t.trim().is_empty());
    let text = match said {
        Some(said) => format!("The A2A agent `{agent}` {what}: {said}"),
        None => format!("The A2A agent `{agent}` {what} without saying why."),
    };
    let mut result = CallToolResult::error(vec![ContentBlock::text(text)]);
    result.structured_content = Some(json!({"task": snapshot.raw}));
    result
}

/// An `isError` result with one text.
pub fn tool_error(text: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(text.into())])
}
