//! Request parsing and validation: the query-string members, the ChatSync JSON body and
//! the constraints of the service model, which the SDK does not check on the client side.
//!
//! Parsing failures (not JSON, not an object, a member of the wrong JSON type) are
//! `ValidationException` with reason `CANNOT_PARSE`. Constraint failures are collected
//! and reported together as `FIELD_VALIDATION_FAILED`, each naming the member's JSON path
//! (`chatModeConfiguration.pluginConfiguration.pluginId`, `attributeFilter.andAllFilters[0].equalsTo.name`,
//! `userGroups[1]`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::errors::{ApiError, FieldError};
use super::filter::{self, AttributeFilter};
use super::ids::{
    ID_PATTERN, PLUGIN_ID_PATTERN, has_no_control_chars, is_lowercase_uuid, is_resource_id,
};

/// `chatMode` values.
pub(super) const CHAT_MODES: &[&str] = &["RETRIEVAL_MODE", "CREATOR_MODE", "PLUGIN_MODE"];

/// Query-string members shared by the operations.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct Query {
    /// The bare `sync` key (ChatSync vs the streaming Chat).
    pub sync: bool,
    /// `userId`.
    pub user_id: Option<String>,
    /// Not a query member: the Identity Center user of the identity-aware
    /// session that signed the request, who owns its conversations.
    pub session_user: Option<String>,
    /// `userGroups`, in order.
    pub user_groups: Vec<String>,
    /// `nextToken`.
    pub next_token: Option<String>,
    /// `maxResults`, unparsed.
    pub max_results: Option<String>,
}

impl Query {
    /// Parses a raw query string (`sync&userId=a&userGroups=x&userGroups=y`).
    pub(super) fn parse(raw: Option<&str>) -> Self {
        let mut q = Self::default();
        for (key, value) in form_urlencoded::parse(raw.unwrap_or_default().as_bytes()) {
            match key.as_ref() {
                "sync" => q.sync = true,
                "userId" => q.user_id = Some(value.into_owned()),
                "userGroups" => q.user_groups.push(value.into_owned()),
                "nextToken" => q.next_token = Some(value.into_owned()),
                "maxResults" => q.max_results = Some(value.into_owned()),
                _ => {}
            }
        }
        q
    }

    /// The key conversations are kept under: the user id, or `anonymous`.
    pub(super) fn owner(&self) -> String {
        if let Some(user) = &self.session_user {
            return format!("idc:{user}");
        }
        self.user_id.clone().unwrap_or_else(|| "anonymous".into())
    }

    /// Checks `userId` (1-1024 characters, no control characters) and each
    /// `userGroups` item (1-2048 characters).
    pub(super) fn validate_user(&self, errors: &mut Vec<FieldError>) {
        if let Some(user) = &self.user_id {
            let len = user.chars().count();
            if !(1..=1024).contains(&len) {
                errors.push(FieldError::new(
                    "userId",
                    "Member must have length between 1 and 1024",
                ));
            } else if !has_no_control_chars(user) {
                errors.push(FieldError::new(
                    "userId",
                    "Member must satisfy regular expression pattern: \\P{C}*",
                ));
            }
        }
        for (i, group) in self.user_groups.iter().enumerate() {
            let len = group.chars().count();
            if !(1..=2048).contains(&len) {
                errors.push(FieldError::new(
                    format!("userGroups[{i}]"),
                    "Member must have length between 1 and 2048",
                ));
            }
        }
    }

    /// Validates `maxResults` (1-100) and `nextToken` (1-800 characters) and returns the
    /// page size and the offset the token encodes (tokens are `p<offset>`).
    pub(super) fn page(&self, errors: &mut Vec<FieldError>) -> (usize, usize) {
        let mut size = 100;
        if let Some(raw) = &self.max_results {
            match raw.parse::<usize>() {
                Ok(n) if (1..=100).contains(&n) => size = n,
                _ => errors.push(FieldError::new(
                    "maxResults",
                    "Member must have value between 1 and 100",
                )),
            }
        }
        let mut offset = 0;
        if let Some(token) = &self.next_token {
            match token
                .strip_prefix('p')
                .and_then(|n| n.parse::<usize>().ok())
            {
                Some(n) if token.len() <= 800 => offset = n,
                _ => errors.push(FieldError::new(
                    "nextToken",
                    "Member is not a valid next token",
                )),
            }
        }
        (size, offset)
    }
}

/// The next page token for `offset`.
pub(super) fn next_token(offset: usize) -> String {
    format!("p{offset}")
}

/// ChatSync's JSON body. Unknown keys are ignored, as restJson1 servers do.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ChatSyncInput {
    /// The question.
    pub user_message: Option<String>,
    /// Continue this conversation.
    pub conversation_id: Option<String>,
    /// The conversation's latest SYSTEM message.
    pub parent_message_id: Option<String>,
    /// Idempotency token (the SDK always fills it).
    pub client_token: Option<String>,
    /// `RETRIEVAL_MODE` (default), `CREATOR_MODE` or `PLUGIN_MODE`.
    pub chat_mode: Option<String>,
    /// The plugin for `PLUGIN_MODE`.
    pub chat_mode_configuration: Option<ChatModeConfiguration>,
    /// Files; validated, not processed.
    pub attachments: Option<Vec<AttachmentInput>>,
    /// Run a reviewed plugin action.
    pub action_execution: Option<ActionExecution>,
    /// Answer to a sign-in challenge.
    pub auth_challenge_response: Option<AuthChallengeResponse>,
    /// Restrict retrieval to matching documents.
    pub attribute_filter: Option<AttributeFilter>,
}

/// `chatModeConfiguration` (a union).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ChatModeConfiguration {
    /// The only member.
    pub plugin_configuration: Option<PluginConfiguration>,
}

/// `pluginConfiguration`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct PluginConfiguration {
    /// Lowercase UUID.
    pub plugin_id: Option<String>,
}

/// `AttachmentInput`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct AttachmentInput {
    /// Base64 content.
    pub data: Option<String>,
    /// File name, 1-1000 characters.
    pub name: Option<String>,
    /// Copy of an earlier attachment.
    pub copy_from: Option<Value>,
}

/// `actionExecution` (also echoed in ListMessages).
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub(super) struct ActionExecution {
    /// The plugin whose action runs.
    pub plugin_id: Option<String>,
    /// Field values, each `{"value": <document>}`.
    pub payload: Option<BTreeMap<String, PayloadField>>,
    /// Exactly one character.
    pub payload_field_name_separator: Option<String>,
}

/// One `actionExecution.payload` entry.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
pub(super) struct PayloadField {
    /// Any JSON document.
    #[serde(default)]
    pub value: Value,
}

/// `authChallengeResponse`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct AuthChallengeResponse {
    /// Keys 1-100 characters, values 1-2048.
    pub response_map: Option<BTreeMap<String, String>>,
}

impl ChatSyncInput {
    /// The chat mode, `RETRIEVAL_MODE` when unset.
    pub(super) fn mode(&self) -> &str {
        self.chat_mode.as_deref().unwrap_or("RETRIEVAL_MODE")
    }

    /// The configured plugin id, if any.
    pub(super) fn plugin_id(&self) -> Option<&str> {
        self.chat_mode_configuration
            .as_ref()
            .and_then(|c| c.plugin_configuration.as_ref())
            .and_then(|p| p.plugin_id.as_deref())
    }

    /// The user message, if present and not blank.
    pub(super) fn message(&self) -> Option<&str> {
        self.user_message
            .as_deref()
            .map(str::trim)
            .filter(|m| !m.is_empty())
    }
}

/// Parses a ChatSync body (an empty body is `{}`) into the raw JSON value, for the
/// idempotency fingerprint, and the typed input.
pub(super) fn parse_chat_sync(body: &[u8]) -> Result<(Value, ChatSyncInput), ApiError> {
    let value: Value = if body.iter().all(u8::is_ascii_whitespace) {
        Value::Object(Default::default())
    } else {
        serde_json::from_slice(body).map_err(|e| {
            ApiError::cannot_parse(format!("Could not parse the request body as JSON: {e}"))
        })?
    };
    if !value.is_object() {
        return Err(ApiError::cannot_parse(
            "The request body must be a JSON object.",
        ));
    }
    let input = serde_path_to_error::deserialize(&value).map_err(|e| {
        let path = e.path().to_string();
        ApiError::cannot_parse(format!(
            "Could not parse the value at '{path}': {}",
            e.into_inner()
        ))
    })?;
    Ok((value, input))
}

fn pattern(errors: &mut Vec<FieldError>, name: &str, value: &Option<String>) {
    if let Some(v) = value
        && !is_resource_id(v)
    {
        errors.push(FieldError::new(
            name,
            format!("Member must satisfy regular expression pattern: {ID_PATTERN}"),
        ));
    }
}

fn plugin_id(errors: &mut Vec<FieldError>, name: &str, value: Option<&str>) {
    match value {
        None => errors.push(FieldError::new(name, "Member must not be null")),
        Some(id) if !is_lowercase_uuid(id) => errors.push(FieldError::new(
            name,
            format!("Member must satisfy regular expression pattern: {PLUGIN_ID_PATTERN}"),
        )),
        Some(_) => {}
    }
}

/// Checks every model constraint of the ChatSync input; all failures are collected.
pub(super) fn validate_chat_sync(input: &ChatSyncInput, errors: &mut Vec<FieldError>) {
    if input.message().is_none()
        && input.action_execution.is_none()
        && input.auth_challenge_response.is_none()
    {
        errors.push(FieldError::new(
            "userMessage",
            "Member must not be null or blank unless actionExecution or authChallengeResponse \
             is present",
        ));
    }
    pattern(errors, "conversationId", &input.conversation_id);
    pattern(errors, "parentMessageId", &input.parent_message_id);
    match (&input.conversation_id, &input.parent_message_id) {
        (Some(_), None) => errors.push(FieldError::new(
            "parentMessageId",
            "Member must not be null when conversationId is present",
        )),
        (None, Some(_)) => errors.push(FieldError::new(
            "conversationId",
            "Member must not be null when parentMessageId is present",
        )),
        _ => {}
    }
    if let Some(token) = &input.client_token {
        let len = token.chars().count();
        if !(1..=100).contains(&len) {
            errors.push(FieldError::new(
                "clientToken",
                "Member must have length between 1 and 100",
            ));
        }
    }
    if let Some(mode) = &input.chat_mode
        && !CHAT_MODES.contains(&mode.as_str())
    {
        errors.push(FieldError::new(
            "chatMode",
            format!(
                "Member must satisfy enum value set: [{}]",
                CHAT_MODES.join(", ")
            ),
        ));
    }
    match (&input.chat_mode_configuration, input.mode()) {
        (Some(config), "PLUGIN_MODE") => match &config.plugin_configuration {
            Some(p) => plugin_id(
                errors,
                "chatModeConfiguration.pluginConfiguration.pluginId",
                p.plugin_id.as_deref(),
            ),
            None => errors.push(FieldError::new(
                "chatModeConfiguration",
                "Member must have exactly one member set",
            )),
        },
        (None, "PLUGIN_MODE") => errors.push(FieldError::new(
            "chatModeConfiguration",
            "Member must not be null when chatMode is PLUGIN_MODE",
        )),
        (Some(_), _) => errors.push(FieldError::new(
            "chatModeConfiguration",
            "Member is only allowed when chatMode is PLUGIN_MODE",
        )),
        (None, _) => {}
    }
    if let Some(attachments) = &input.attachments {
        if attachments.is_empty() || attachments.len() > 5 {
            errors.push(FieldError::new(
                "attachments",
                "Member must have between 1 and 5 items",
            ));
        }
        for (i, a) in attachments.iter().enumerate() {
            if a.data.is_none() && a.copy_from.is_none() {
                errors.push(FieldError::new(
                    format!("attachments[{i}]"),
                    "Member must have data or copyFrom set",
                ));
            }
            if let Some(name) = &a.name
                && !(1..=1000).contains(&name.chars().count())
            {
                errors.push(FieldError::new(
                    format!("attachments[{i}].name"),
                    "Member must have length between 1 and 1000",
                ));
            }
        }
    }
    if let Some(action) = &input.action_execution {
        plugin_id(
            errors,
            "actionExecution.pluginId",
            action.plugin_id.as_deref(),
        );
        if action.payload.is_none() {
            errors.push(FieldError::new(
                "actionExecution.payload",
                "Member must not be null",
            ));
        }
        match action.payload_field_name_separator.as_deref() {
            None => errors.push(FieldError::new(
                "actionExecution.payloadFieldNameSeparator",
                "Member must not be null",
            )),
            Some(s) if s.chars().count() != 1 => errors.push(FieldError::new(
                "actionExecution.payloadFieldNameSeparator",
                "Member must have length equal to 1",
            )),
            Some(_) => {}
        }
        if input.auth_challenge_response.is_some() {
            errors.push(FieldError::new(
                "authChallengeResponse",
                "Member must not be set together with actionExecution",
            ));
        }
    }
    if let Some(response) = &input.auth_challenge_response {
        match &response.response_map {
            None => errors.push(FieldError::new(
                "authChallengeResponse.responseMap",
                "Member must not be null",
            )),
            Some(map) => {
                for (key, value) in map {
                    if !(1..=100).contains(&key.chars().count()) {
                        errors.push(FieldError::new(
                            "authChallengeResponse.responseMap",
                            "Map keys must have length between 1 and 100",
                        ));
                    }
                    if !(1..=2048).contains(&value.chars().count()) {
                        errors.push(FieldError::new(
                            format!("authChallengeResponse.responseMap.{key}"),
                            "Member must have length between 1 and 2048",
                        ));
                    }
                }
            }
        }
    }
    if let Some(f) = &input.attribute_filter {
        filter::validate(f, "attributeFilter", 0, errors);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errors_for(body: &str) -> Vec<String> {
        let (_, input) = parse_chat_sync(body.as_bytes()).expect("parses");
        let mut errors = Vec::new();
        validate_chat_sync(&input, &mut errors);
        errors.into_iter().map(|e| e.name).collect()
    }

    #[test]
    fn query_keeps_repeated_groups_and_the_bare_sync_key() {
        let q = Query::parse(Some(
            "sync&userId=alice%40example.com&userGroups=a&userGroups=b%20c",
        ));
        assert!(q.sync);
        assert_eq!(q.user_id.as_deref(), Some("alice@example.com"));
        assert_eq!(q.user_groups, vec!["a", "b c"]);
        assert!(!Query::parse(Some("userId=x")).sync);
    }

    #[test]
    fn a_plain_question_is_valid() {
        assert!(errors_for(r#"{"userMessage":"hi","clientToken":"abc"}"#).is_empty());
    }

    #[test]
    fn constraints_name_their_fields() {
        assert_eq!(errors_for("{}"), vec!["userMessage"]);
        assert_eq!(
            errors_for(r#"{"userMessage":"x","conversationId":"short"}"#),
            vec!["conversationId", "parentMessageId"]
        );
        assert_eq!(
            errors_for(
                r#"{"userMessage":"x","chatMode":"PLUGIN_MODE","chatModeConfiguration":{"pluginConfiguration":{"pluginId":"NOT-A-UUID"}}}"#
            ),
            vec!["chatModeConfiguration.pluginConfiguration.pluginId"]
        );
        assert_eq!(
            errors_for(r#"{"userMessage":"x","chatMode":"FAST_MODE"}"#),
            vec!["chatMode"]
        );
        let long_token = "t".repeat(101);
        assert_eq!(
            errors_for(&format!(
                r#"{{"userMessage":"x","clientToken":"{long_token}"}}"#
            )),
            vec!["clientToken"]
        );
        assert_eq!(
            errors_for(
                r#"{"actionExecution":{"pluginId":"7f1c2d3e-4b5a-4c6d-8e9f-0a1b2c3d4e5f","payload":{},"payloadFieldNameSeparator":".."}}"#
            ),
            vec!["actionExecution.payloadFieldNameSeparator"]
        );
    }

    #[test]
    fn wrong_types_cannot_be_parsed() {
        let err = parse_chat_sync(br#"{"userMessage": 42}"#).expect_err("type");
        assert_eq!(err.code(), "ValidationException");
        assert!(err.message().contains("userMessage"), "{}", err.message());
        assert!(parse_chat_sync(b"not json").is_err());
        assert!(parse_chat_sync(b"[1]").is_err());
        assert!(parse_chat_sync(b"").is_ok());
    }

    #[test]
    fn user_and_page_limits() {
        let mut errors = Vec::new();
        let q = Query {
            user_id: Some(String::new()),
            user_groups: vec!["ok".into(), String::new()],
            max_results: Some("101".into()),
            next_token: Some("garbage".into()),
            ..Query::default()
        };
        q.validate_user(&mut errors);
        q.page(&mut errors);
        let names: Vec<_> = errors.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(
            names,
            vec!["userId", "userGroups[1]", "maxResults", "nextToken"]
        );
    }
}
