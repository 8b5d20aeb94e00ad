//! The A2A v1.0 contract (`contracts/a2a/a2a.proto`) as a strict ProtoJSON
//! validator: the proto is compiled with `protox` (pure Rust; the googleapis
//! option files are vendored beside it, the well-known types come with protox),
//! and JSON is read into a `prost-reflect` `DynamicMessage` refusing unknown
//! fields, so a misspelt or undocumented field, a wrong enum name, a malformed
//! timestamp or base64 `bytes` fails. On top of ProtoJSON parsing, which cannot
//! see them, two checks walk the JSON beside the descriptor:
//!
//! - a field annotated `(google.api.field_behavior) = REQUIRED` must be present
//!   (an empty list or string counts as present: `ListTasksResponse` requires
//!   `nextPageToken` and sends `""` on the last page);
//! - at most one member of each (non-synthetic) `oneof` may be set, and exactly one
//!   for `Part.content`, `SendMessageResponse.payload`, `StreamResponse.payload`
//!   and `SecurityScheme.scheme`, which the specification requires.

use std::sync::OnceLock;

use prost_reflect::{
    DescriptorPool, DeserializeOptions, DynamicMessage, ExtensionDescriptor, Kind,
    MessageDescriptor, Value as ReflectValue,
};
use serde_json::Value;

/// The proto package of A2A v1.0.
pub(super) const PACKAGE: &str = "lf.a2a.v1";

/// `google.api.FieldBehavior.REQUIRED`.
const REQUIRED: i32 = 2;

/// Oneofs of which exactly one member must be set.
const EXACTLY_ONE: [&str; 4] = [
    "lf.a2a.v1.Part.content",
    "lf.a2a.v1.SendMessageResponse.payload",
    "lf.a2a.v1.StreamResponse.payload",
    "lf.a2a.v1.SecurityScheme.scheme",
];

/// The compiled A2A contract.
#[derive(Debug)]
pub struct A2aContract {
    pool: DescriptorPool,
    field_behavior: ExtensionDescriptor,
}

/// The A2A contract, compiled once per test binary.
pub fn a2a() -> &'static A2aContract {
    static CONTRACT: OnceLock<A2aContract> = OnceLock::new();
    CONTRACT.get_or_init(|| {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../contracts/a2a");
        let pool = protox::Compiler::new([dir])
            .and_then(|mut compiler| {
                compiler.include_imports(true).open_file("a2a.proto")?;
                Ok(compiler.descriptor_pool())
            })
            .unwrap_or_else(|e| panic!("compiling the vendored {dir}/a2a.proto: {e}"));
        let field_behavior = pool
            .get_extension_by_name("google.api.field_behavior")
            .expect("a2a.proto imports google/api/field_behavior.proto");
        A2aContract {
            pool,
            field_behavior,
        }
    })
}

impl A2aContract {
    /// The descriptor of `name` (`Task` or `lf.a2a.v1.Task`).
    pub fn message(&self, name: &str) -> Option<MessageDescriptor> {
        let full = if name.contains('.') {
            name.to_owned()
        } else {
            format!("{PACKAGE}.{name}")
        };
        self.pool.get_message_by_name(&full)
    }

    /// What is wrong with `json` as the ProtoJSON form of message `name`; empty when
    /// it conforms.
    pub fn problems(&self, name: &str, json: &Value) -> Vec<String> {
        let Some(descriptor) = self.message(name) else {
            return vec![format!("a2a.proto has no message {name}")];
        };
        let options = DeserializeOptions::new().deny_unknown_fields(true);
        if let Err(e) = DynamicMessage::deserialize_with_options(descriptor.clone(), json, &options)
        {
            return vec![format!("{}: not valid ProtoJSON: {e}", descriptor.name())];
        }
        let mut problems = Vec::new();
        self.walk(&descriptor, json, descriptor.name(), &mut problems);
        problems
    }

    /// The message a JSON-RPC method answers with (§9.4; SSE events of the
    /// streaming methods are `StreamResponse`s).
    pub fn result_message(method: &str) -> Option<&'static str> {
        Some(match method {
            "SendMessage" => "SendMessageResponse",
            "SendStreamingMessage" | "SubscribeToTask" => "StreamResponse",
            "GetTask" | "CancelTask" => "Task",
            "ListTasks" => "ListTasksResponse",
            "CreateTaskPushNotificationConfig" | "GetTaskPushNotificationConfig" => {
                "TaskPushNotificationConfig"
            }
            "ListTaskPushNotificationConfigs" => "ListTaskPushNotificationConfigsResponse",
            "DeleteTaskPushNotificationConfig" => "google.protobuf.Empty",
            "GetExtendedAgentCard" => "AgentCard",
            _ => return None,
        })
    }

    /// The message a JSON-RPC method takes as `params`.
    pub fn params_message(method: &str) -> Option<&'static str> {
        Some(match method {
            "SendMessage" | "SendStreamingMessage" => "SendMessageRequest",
            "GetTask" => "GetTaskRequest",
            "ListTasks" => "ListTasksRequest",
            "CancelTask" => "CancelTaskRequest",
            "SubscribeToTask" => "SubscribeToTaskRequest",
            "CreateTaskPushNotificationConfig" => "TaskPushNotificationConfig",
            "GetTaskPushNotificationConfig" => "GetTaskPushNotificationConfigRequest",
            "ListTaskPushNotificationConfigs" => "ListTaskPushNotificationConfigsRequest",
            "DeleteTaskPushNotificationConfig" => "DeleteTaskPushNotificationConfigRequest",
            "GetExtendedAgentCard" => "GetExtendedAgentCardRequest",
            _ => return None,
        })
    }

    /// Problems of a JSON-RPC response body of `method`: the 2.0 envelope, and either
    /// a `result` conforming to the method's message or an `error` with an integer
    /// `code`, a `message` and (if present) a `data` array of `@type`d objects (§9.5).
    pub fn response_problems(&self, method: &str, body: &Value) -> Vec<String> {
        let mut problems = Vec::new();
        let Some(object) = body.as_object() else {
            return vec!["the JSON-RPC response is not an object".into()];
        };
        if object.get("jsonrpc") != Some(&Value::from("2.0")) {
            problems.push("`jsonrpc` is not \"2.0\"".into());
        }
        if !object.contains_key("id") {
            problems.push("`id` is missing".into());
        }
        if let Some(extra) = object
            .keys()
            .find(|k| !matches!(k.as_str(), "jsonrpc" | "id" | "result" | "error"))
        {
            problems.push(format!("unknown member `{extra}`"));
        }
        match (object.get("result"), object.get("error")) {
            (Some(result), None) => match Self::result_message(method) {
                Some(name) => problems.extend(self.problems(name, result)),
                None => problems.push(format!("{method} is not an A2A method")),
            },
            (None, Some(error)) => problems.extend(error_problems(error)),
            _ => problems.push("exactly one of `result` and `error` must be present".into()),
        }
        problems
    }

    fn required(&self, field: &prost_reflect::FieldDescriptor) -> bool {
        let options = field.options();
        if !options.has_extension(&self.field_behavior) {
            return false;
        }
        match options.get_extension(&self.field_behavior).as_ref() {
            ReflectValue::List(values) => values
                .iter()
                .any(|v| matches!(v, ReflectValue::EnumNumber(n) if *n == REQUIRED)),
            _ => false,
        }
    }

    /// REQUIRED presence and oneof counts, recursively through messages of this
    /// package (well-known types are left to ProtoJSON parsing).
    fn walk(&self, descriptor: &MessageDescriptor, json: &Value, at: &str, out: &mut Vec<String>) {
        let Some(object) = json.as_object() else {
            return;
        };
        for field in descriptor.fields() {
            let present =
                object.contains_key(field.json_name()) || object.contains_key(field.name());
            if !present && self.required(&field) {
                out.push(format!(
                    "{at}.{}: REQUIRED by a2a.proto but missing",
                    field.json_name()
                ));
            }
            let Some(value) = object
                .get(field.json_name())
                .or_else(|| object.get(field.name()))
            else {
                continue;
            };
            let Kind::Message(inner) = field.kind() else {
                continue;
            };
            let path = format!("{at}.{}", field.json_name());
            if field.is_map() {
                let value_field = inner.map_entry_value_field();
                if let (Kind::Message(entry), Some(map)) = (value_field.kind(), value.as_object())
                    && entry.package_name() == PACKAGE
                {
                    for (key, item) in map {
                        self.walk(&entry, item, &format!("{path}[{key:?}]"), out);
                    }
                }
            } else if inner.package_name() != PACKAGE {
                // Another package's message (a google.protobuf type): not ours to check.
            } else if field.is_list() {
                for (i, item) in value.as_array().into_iter().flatten().enumerate() {
                    self.walk(&inner, item, &format!("{path}[{i}]"), out);
                }
            } else {
                self.walk(&inner, value, &path, out);
            }
        }
        for oneof in descriptor.oneofs().filter(|o| !o.is_synthetic()) {
            let set: Vec<String> = oneof
                .fields()
                .filter(|f| {
                    object
                        .get(f.json_name())
                        .or_else(|| object.get(f.name()))
                        .is_some_and(|v| !v.is_null())
                })
                .map(|f| f.json_name().to_owned())
                .collect();
            let exactly_one = EXACTLY_ONE.contains(&oneof.full_name());
            if set.len() > 1 || (exactly_one && set.is_empty()) {
                out.push(format!(
                    "{at}: oneof {} must have {} member set, has {set:?}",
                    oneof.name(),
                    if exactly_one {
                        "exactly one"
                    } else {
                        "at most one"
                    }
                ));
            }
        }
    }
}

/// Problems of a JSON-RPC error object (§9.5).
pub fn error_problems(error: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    let Some(object) = error.as_object() else {
        return vec!["`error` is not an object".into()];
    };
    if !object.get("code").is_some_and(Value::is_i64) {
        problems.push("error.code is not an integer".into());
    }
    if !object.get("message").is_some_and(Value::is_string) {
        problems.push("error.message is not a string".into());
    }
    if let Some(data) = object.get("data") {
        match data.as_array() {
            None => problems.push("error.data is not an array (§9.5)".into()),
            Some(items) => {
                for (i, item) in items.iter().enumerate() {
                    if !item.get("@type").is_some_and(Value::is_string) {
                        problems.push(format!("error.data[{i}] has no `@type` (§9.5)"));
                    }
                }
            }
        }
    }
    if let Some(extra) = object
        .keys()
        .find(|k| !matches!(k.as_str(), "code" | "message" | "data"))
    {
        problems.push(format!("error has unknown member `{extra}`"));
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn task() -> Value {
        json!({
            "id": "t1",
            "contextId": "c1",
            "status": { "state": "TASK_STATE_WORKING", "timestamp": "2025-10-28T10:30:00.000Z" },
        })
    }

    #[test]
    fn a_conforming_task_passes() {
        assert_eq!(a2a().problems("Task", &task()), Vec::<String>::new());
    }

    #[test]
    fn unknown_fields_wrong_enums_and_missing_required_fail() {
        let mut unknown = task();
        unknown["kind"] = json!("task");
        assert!(!a2a().problems("Task", &unknown).is_empty());
        let mut lowercase = task();
        lowercase["status"]["state"] = json!("working");
        assert!(!a2a().problems("Task", &lowercase).is_empty());
        let mut missing = task();
        missing.as_object_mut().expect("object").remove("status");
        let problems = a2a().problems("Task", &missing);
        assert!(
            problems.iter().any(|p| p.contains("status")),
            "{problems:?}"
        );
    }

    #[test]
    fn a_part_needs_exactly_one_content() {
        let message =
            |parts: Value| json!({ "messageId": "m", "role": "ROLE_USER", "parts": parts });
        assert!(
            a2a()
                .problems("Message", &message(json!([{ "text": "hi" }])))
                .is_empty()
        );
        assert!(
            !a2a()
                .problems("Message", &message(json!([{ "filename": "a" }])))
                .is_empty()
        );
        assert!(
            !a2a()
                .problems(
                    "Message",
                    &message(json!([{ "text": "a", "url": "http://x" }]))
                )
                .is_empty()
        );
    }

    #[test]
    fn json_rpc_envelopes_are_checked() {
        let ok = json!({ "jsonrpc": "2.0", "id": 1, "result": task() });
        assert!(a2a().response_problems("GetTask", &ok).is_empty());
        let error = json!({ "jsonrpc": "2.0", "id": 1, "error": { "code": -32001, "message": "x", "data": [{}] } });
        assert!(!a2a().response_problems("GetTask", &error).is_empty());
    }
}
