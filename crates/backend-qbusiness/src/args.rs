//! The tool's input: upstream's single `query`, plus optional inputs for
//! conversations, chat modes, plugins, filters and identity-aware
//! applications. Everything is validated here, before any call, with errors
//! that name the field and the fix.

use aws_sdk_qbusiness::types::{AttributeFilter, ChatMode};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::filter;

/// Arguments of `QBusinessQueryTool`.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct QueryArgs {
    /// User query, question or request to the Amazon Q Business application.
    pub query: String,
    /// Continue this conversation (the `conversationId` of an earlier answer).
    /// Requires `parent_message_id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation_id: Option<String>,
    /// The `systemMessageId` of the answer being followed up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_message_id: Option<String>,
    /// RETRIEVAL_MODE answers from indexed documents, CREATOR_MODE from the
    /// model alone, PLUGIN_MODE through the plugin named by `plugin_id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chat_mode: Option<ChatModeArg>,
    /// The plugin to use in PLUGIN_MODE (a lowercase UUID).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugin_id: Option<String>,
    /// Restrict retrieval by document attributes: a Q Business AttributeFilter
    /// as JSON, e.g. {"equalsTo": {"name": "_category", "value": {"stringValue": "HR"}}}.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attribute_filter: Option<Value>,
    /// The user to answer as. Not in the schema: the operator sets each
    /// principal's identity (`[qbusiness.users]`), and a caller's is refused
    /// unless the gateway serves one person (`trust_caller_identity`); kept
    /// here so that refusal can name the field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(skip)]
    pub user_id: Option<String>,
    /// The user's groups; as `user_id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(skip)]
    pub user_groups: Option<Vec<String>>,
}

/// ChatSync's `chatMode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[allow(clippy::enum_variant_names)]
pub enum ChatModeArg {
    #[serde(rename = "RETRIEVAL_MODE")]
    RetrievalMode,
    #[serde(rename = "CREATOR_MODE")]
    CreatorMode,
    #[serde(rename = "PLUGIN_MODE")]
    PluginMode,
}

impl ChatModeArg {
    pub fn to_sdk(self) -> ChatMode {
        match self {
            Self::RetrievalMode => ChatMode::RetrievalMode,
            Self::CreatorMode => ChatMode::CreatorMode,
            Self::PluginMode => ChatMode::PluginMode,
        }
    }
}

/// Arguments checked and converted for the SDK.
#[derive(Debug, Clone)]
pub struct ValidQuery {
    pub query: String,
    pub conversation: Option<(String, String)>,
    pub chat_mode: Option<ChatModeArg>,
    pub plugin_id: Option<String>,
    pub attribute_filter: Option<AttributeFilter>,
    pub user_id: Option<String>,
    pub user_groups: Vec<String>,
}

/// Upstream's text for an empty query, kept byte for byte.
pub const EMPTY_QUERY: &str = "Error: Query cannot be empty";

/// Whether `id` has the shape the service model gives `ConversationId` and
/// `MessageId`: 36 characters, `[a-zA-Z0-9][a-zA-Z0-9-]{35}`.
pub(crate) fn is_message_id(id: &str) -> bool {
    let bytes = id.as_bytes();
    bytes.len() == 36
        && bytes[0].is_ascii_alphanumeric()
        && bytes[1..]
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || *b == b'-')
}

fn is_lowercase_uuid(id: &str) -> bool {
    let groups: Vec<&str> = id.split('-').collect();
    groups.len() == 5
        && groups.iter().map(|g| g.len()).eq([8, 4, 4, 4, 12])
        && groups.iter().all(|g| {
            g.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        })
}

impl QueryArgs {
    /// Checks every field; the error says which field is wrong and how to fix it.
    /// An empty query is reported with upstream's exact text.
    pub fn validate(self) -> Result<ValidQuery, String> {
        if self.query.trim().is_empty() {
            return Err(EMPTY_QUERY.to_owned());
        }
        let conversation = match (self.conversation_id, self.parent_message_id) {
            (None, None) => None,
            (Some(_), None) => {
                return Err(
                    "Error: `parent_message_id` is required with `conversation_id`: pass \
                            the systemMessageId of the answer you are following up"
                        .into(),
                );
            }
            (None, Some(_)) => {
                return Err(
                    "Error: `parent_message_id` needs `conversation_id`: pass the \
                            conversationId of the answer you are following up"
                        .into(),
                );
            }
            (Some(c), Some(p)) => {
                for (field, id) in [("conversation_id", &c), ("parent_message_id", &p)] {
                    if !is_message_id(id) {
                        return Err(format!(
                            "Error: `{field}` must be the 36-character id Amazon Q Business \
                             returned (letters, digits and dashes), got {id:?}"
                        ));
                    }
                }
                Some((c, p))
            }
        };
        if let Some(plugin) = &self.plugin_id {
            if !is_lowercase_uuid(plugin) {
                return Err(format!(
                    "Error: `plugin_id` must be a lowercase UUID like \
                     0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b, got {plugin:?}"
                ));
            }
            if self.chat_mode.is_some_and(|m| m != ChatModeArg::PluginMode) {
                return Err("Error: `plugin_id` only applies with `chat_mode` PLUGIN_MODE".into());
            }
        } else if self.chat_mode == Some(ChatModeArg::PluginMode) {
            return Err("Error: `chat_mode` PLUGIN_MODE needs `plugin_id`".into());
        }
        let chat_mode = match (&self.plugin_id, self.chat_mode) {
            (Some(_), None) => Some(ChatModeArg::PluginMode),
            (_, mode) => mode,
        };
        let attribute_filter = self
            .attribute_filter
            .as_ref()
            .map(|v| filter::parse(v, "attribute_filter"))
            .transpose()
            .map_err(|e| format!("Error: {e}"))?;
        if let Some(user) = &self.user_id
            && (user.is_empty() || user.chars().count() > 1024)
        {
            return Err("Error: `user_id` must be 1 to 1024 characters".into());
        }
        let user_groups = self.user_groups.unwrap_or_default();
        if let Some(i) = user_groups
            .iter()
            .position(|g| g.is_empty() || g.chars().count() > 2048)
        {
            return Err(format!(
                "Error: `user_groups[{i}]` must be 1 to 2048 characters"
            ));
        }
        Ok(ValidQuery {
            query: self.query,
            conversation,
            chat_mode,
            plugin_id: self.plugin_id,
            attribute_filter,
            user_id: self.user_id,
            user_groups,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: Value) -> QueryArgs {
        serde_json::from_value(v).expect("args")
    }

    #[test]
    fn empty_query_keeps_upstreams_text() {
        let err = args(serde_json::json!({"query": "  "}))
            .validate()
            .expect_err("empty");
        assert_eq!(err, "Error: Query cannot be empty");
    }

    #[test]
    fn follow_up_needs_both_ids_in_the_right_shape() {
        let err = args(serde_json::json!({"query": "q", "conversation_id": "x"}))
            .validate()
            .expect_err("missing parent");
        assert!(err.contains("`parent_message_id`"), "{err}");
        let id = "a".repeat(36);
        let err = args(
            serde_json::json!({"query": "q", "conversation_id": "bad", "parent_message_id": id}),
        )
        .validate()
        .expect_err("bad id");
        assert!(err.contains("`conversation_id`"), "{err}");
        let ok =
            args(serde_json::json!({"query": "q", "conversation_id": id, "parent_message_id": id}))
                .validate()
                .expect("valid");
        assert!(ok.conversation.is_some());
    }

    #[test]
    fn plugin_id_implies_plugin_mode_and_must_be_a_uuid() {
        let ok = args(
            serde_json::json!({"query": "q", "plugin_id": "0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b"}),
        )
        .validate()
        .expect("valid");
        assert_eq!(ok.chat_mode, Some(ChatModeArg::PluginMode));
        let err = args(serde_json::json!({"query": "q", "plugin_id": "Jira"}))
            .validate()
            .expect_err("not a uuid");
        assert!(err.contains("`plugin_id`"), "{err}");
        let err = args(serde_json::json!({"query": "q", "chat_mode": "PLUGIN_MODE"}))
            .validate()
            .expect_err("no plugin");
        assert!(err.contains("plugin_id"), "{err}");
    }
}
