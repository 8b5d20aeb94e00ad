//! Tool schemas in their most portable spelling, with the same meaning.
//!
//! A schema derived by `schemars` says "any JSON value" with a bare `true`
//! (a `serde_json::Value` field) and "a string or null" with a type array
//! (`"type": ["string", "null"]`, an `Option<String>`). Both are legal JSON
//! Schema, but some clients and model providers map tool schemas onto
//! dialects without them and reject the tool, or every tool of the server
//! (MCP Inspector's `--strict` portability check reports the first as an
//! error and the second as a warning). Every tool the gateway lists is
//! rewritten once, when it is registered:
//!
//! ```text
//! true                          ─▶ {}                      (accepts anything, as before)
//! false                         ─▶ {"not": {}}             (accepts nothing, as before)
//! {"type": ["string", "null"]}  ─▶ {"anyOf": [{"type": "string"}, {"type": "null"}]}
//! {"type": ["string"]}          ─▶ {"type": "string"}
//! ```
//!
//! Keywords beside a type array stay where they were: JSON Schema applies a
//! type's keywords (`format`, `minLength`, …) only to values of that type,
//! so they mean the same next to the `anyOf`.

use std::sync::Arc;

use rmcp::model::{JsonObject, Tool};
use serde_json::{Map, Value};

/// Keywords whose value is one schema.
const ONE: &[&str] = &[
    "additionalProperties",
    "items",
    "contains",
    "not",
    "if",
    "then",
    "else",
    "propertyNames",
    "unevaluatedItems",
    "unevaluatedProperties",
    "additionalItems",
];
/// Keywords whose value is an array of schemas.
const MANY: &[&str] = &["allOf", "anyOf", "oneOf", "prefixItems", "items"];
/// Keywords whose value maps names to schemas.
const NAMED: &[&str] = &[
    "properties",
    "patternProperties",
    "$defs",
    "definitions",
    "dependentSchemas",
];

/// `tool` with its input and output schemas in their portable spelling.
pub fn portable_tool(mut tool: Tool) -> Tool {
    tool.input_schema = Arc::new(portable_object(tool.input_schema.as_ref().clone()));
    if let Some(output) = tool.output_schema.take() {
        tool.output_schema = Some(Arc::new(portable_object(output.as_ref().clone())));
    }
    tool
}

/// A schema object (a tool's root schema) in its portable spelling.
fn portable_object(schema: JsonObject) -> JsonObject {
    match portable(Value::Object(schema)) {
        Value::Object(map) => map,
        // `portable` keeps an object an object.
        _ => JsonObject::new(),
    }
}

/// One schema, and every schema inside it, in its portable spelling.
fn portable(schema: Value) -> Value {
    let mut map = match schema {
        Value::Bool(true) => return Value::Object(Map::new()),
        Value::Bool(false) => {
            let mut never = Map::new();
            never.insert("not".to_owned(), Value::Object(Map::new()));
            return Value::Object(never);
        }
        Value::Object(map) => map,
        // Not a schema (a malformed one is the author's to see): left as is.
        other => return other,
    };
    for key in ONE {
        // `items` may also be an array (draft 4–2019), handled below.
        if let Some(sub) = map.get_mut(*key).filter(|sub| !sub.is_array()) {
            *sub = portable(sub.take());
        }
    }
    for key in MANY {
        if let Some(Value::Array(subs)) = map.get_mut(*key) {
            for sub in subs.iter_mut() {
                *sub = portable(sub.take());
            }
        }
    }
    for key in NAMED {
        if let Some(Value::Object(subs)) = map.get_mut(*key) {
            for sub in subs.values_mut() {
                *sub = portable(sub.take());
            }
        }
    }
    if let Some(Value::Array(_)) = map.get("type")
        && let Some(Value::Array(types)) = map.remove("type")
    {
        match <[Value; 1]>::try_from(types) {
            Ok([single]) => {
                map.insert("type".to_owned(), single);
            }
            Err(types) => {
                let branches: Vec<Value> = types
                    .into_iter()
                    .map(|t| {
                        let mut branch = Map::new();
                        branch.insert("type".to_owned(), t);
                        Value::Object(branch)
                    })
                    .collect();
                add_any_of(&mut map, branches);
            }
        }
    }
    Value::Object(map)
}

/// Adds `branches` as an `anyOf`; one already there is kept, both under
/// `allOf`, so neither constraint is lost.
fn add_any_of(map: &mut Map<String, Value>, branches: Vec<Value>) {
    let mut any_of = Map::new();
    any_of.insert("anyOf".to_owned(), Value::Array(branches));
    match map.remove("anyOf") {
        None => {
            map.extend(any_of);
        }
        Some(existing) => {
            let mut before = Map::new();
            before.insert("anyOf".to_owned(), existing);
            let all_of = map
                .entry("allOf")
                .or_insert_with(|| Value::Array(Vec::new()));
            if let Value::Array(all) = all_of {
                all.push(Value::Object(before));
                all.push(Value::Object(any_of));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn bare_booleans_become_their_object_forms() {
        let schema = json!({
            "type": "object",
            "properties": {"value": true, "never": false},
            "additionalProperties": false,
            "$defs": {"Any": true}
        });
        assert_eq!(
            portable(schema),
            json!({
                "type": "object",
                "properties": {"value": {}, "never": {"not": {}}},
                "additionalProperties": {"not": {}},
                "$defs": {"Any": {}}
            })
        );
    }

    #[test]
    fn type_arrays_become_any_of_branches_and_keep_their_keywords() {
        let schema = json!({
            "type": "object",
            "properties": {
                "name": {"type": ["string", "null"], "description": "who", "minLength": 1},
                "one": {"type": ["integer"]},
                "both": {"type": ["string", "null"], "anyOf": [{"maxLength": 3}, {"type": "null"}]},
                "list": {"type": "array", "items": {"type": ["number", "null"]}}
            }
        });
        assert_eq!(
            portable(schema),
            json!({
                "type": "object",
                "properties": {
                    "name": {
                        "anyOf": [{"type": "string"}, {"type": "null"}],
                        "description": "who",
                        "minLength": 1
                    },
                    "one": {"type": "integer"},
                    "both": {"allOf": [
                        {"anyOf": [{"maxLength": 3}, {"type": "null"}]},
                        {"anyOf": [{"type": "string"}, {"type": "null"}]}
                    ]},
                    "list": {"type": "array", "items": {"anyOf": [{"type": "number"}, {"type": "null"}]}}
                }
            })
        );
    }

    #[test]
    fn a_derived_schema_with_any_values_and_options_comes_out_portable() {
        #[derive(schemars::JsonSchema)]
        #[allow(dead_code)]
        struct Allowed {
            value: Value,
            display: Option<Value>,
            label: Option<String>,
            counts: Vec<Option<u32>>,
        }
        let derived = serde_json::to_value(schemars::schema_for!(Allowed)).expect("schema");
        let tool = Tool::new(
            "t",
            "d",
            Arc::new(derived.as_object().cloned().expect("an object")),
        );
        let before = Value::Object(tool.input_schema.as_ref().clone());
        assert!(
            !agentgate_testkit::contracts::schema_portability_problems(&before).is_empty(),
            "the derived schema has what the rewrite removes: {before}"
        );
        let tool = portable_tool(tool);
        let after = Value::Object(tool.input_schema.as_ref().clone());
        assert_eq!(
            agentgate_testkit::contracts::schema_portability_problems(&after),
            Vec::<String>::new(),
            "{after}"
        );
    }
}
