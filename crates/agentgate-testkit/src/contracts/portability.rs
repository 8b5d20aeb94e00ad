//! Tool-schema portability, as MCP Inspector's `--strict` check reads it
//! (`@modelcontextprotocol/inspector` 2.12.0, its CLI's schema lint): a bare
//! `true` or `false` where a schema object goes is an error (a client that
//! maps schemas onto another dialect rejects the tool), and a `type` array
//! is a warning (a single-`type` dialect, such as the OpenAPI subset of
//! Gemini's function declarations, may reject it or drop the constraint).
//! The Inspector itself needs Node 22.19 or later, and these machines have
//! Node 20, so its two rules are read here from its published source.

use serde_json::Value;

/// Keywords whose value is one schema (`items` only when not an array).
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

/// Every error- and warning-severity finding in `schema`, as
/// `<JSON pointer>: <rule>`; empty when it is portable.
pub fn schema_portability_problems(schema: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    walk(schema, "", &mut problems);
    problems
}

fn walk(schema: &Value, path: &str, problems: &mut Vec<String>) {
    let map = match schema {
        Value::Bool(b) => {
            problems.push(format!("{path}: boolean-schema (bare `{b}`)"));
            return;
        }
        Value::Object(map) => map,
        _ => return,
    };
    if map.get("type").is_some_and(Value::is_array) {
        problems.push(format!("{path}: type-union ({})", map["type"]));
    }
    for (key, sub) in map {
        let at = format!("{path}/{key}");
        if ONE.contains(&key.as_str()) && !sub.is_array() {
            walk(sub, &at, problems);
        } else if MANY.contains(&key.as_str()) {
            for (i, s) in sub.as_array().into_iter().flatten().enumerate() {
                walk(s, &format!("{at}/{i}"), problems);
            }
        } else if NAMED.contains(&key.as_str()) {
            for (name, s) in sub.as_object().into_iter().flatten() {
                walk(s, &format!("{at}/{name}"), problems);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn bare_booleans_and_type_arrays_are_found_where_schemas_go() {
        let schema = json!({
            "type": "object",
            "properties": {
                "any": true,
                "name": {"type": ["string", "null"]},
                "list": {"type": "array", "items": {"anyOf": [false, {"type": "string"}]}}
            },
            // A boolean that is a keyword's value, not a schema, is fine.
            "required": ["name"],
            "x-flag": true
        });
        assert_eq!(
            schema_portability_problems(&schema),
            [
                "/properties/any: boolean-schema (bare `true`)",
                "/properties/list/items/anyOf/0: boolean-schema (bare `false`)",
                "/properties/name: type-union ([\"string\",\"null\"])",
            ]
        );
        assert!(schema_portability_problems(&json!({"type": "object"})).is_empty());
    }
}
