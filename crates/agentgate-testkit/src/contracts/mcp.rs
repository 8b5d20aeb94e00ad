//! The MCP 2025-11-25 schema (`contracts/mcp/2025-11-25/schema.json`, JSON
//! Schema 2020-12, unmodified) as a validator of one named definition, e.g.
//! `CreateTaskResult`: what the 2025-11-25 task wire must answer, checked
//! against the spec's own schema rather than against the types our SDK and
//! its clients happen to share.

use std::sync::OnceLock;

use serde_json::{Value, json};

/// The 2025-11-25 schema, loaded once per test binary.
#[derive(Debug)]
pub struct Mcp2025Schema {
    defs: Value,
}

/// The vendored MCP 2025-11-25 schema.
pub fn mcp_2025_11_25() -> &'static Mcp2025Schema {
    static SCHEMA: OnceLock<Mcp2025Schema> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        let doc = super::vendored_json("mcp/2025-11-25/schema.json");
        Mcp2025Schema {
            defs: doc["$defs"].clone(),
        }
    })
}

impl Mcp2025Schema {
    /// Whether the schema defines `name`.
    pub fn defines(&self, name: &str) -> bool {
        self.defs.get(name).is_some()
    }

    /// What is wrong with `value` as a `name` (empty: nothing).
    pub fn problems(&self, name: &str, value: &Value) -> Vec<String> {
        if !self.defines(name) {
            return vec![format!("the 2025-11-25 schema defines no `{name}`")];
        }
        // References are `#/$defs/…`: validate as part of a document that
        // holds the definitions at that place.
        let root = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$ref": format!("#/$defs/{name}"),
            "$defs": self.defs,
        });
        let validator = match jsonschema::validator_for(&root) {
            Ok(v) => v,
            Err(e) => return vec![format!("the vendored schema does not compile: {e}")],
        };
        validator
            .iter_errors(value)
            .map(|e| format!("{name}: {e} at {}", e.instance_path()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_is_checked_against_the_spec() {
        let schema = mcp_2025_11_25();
        let task = json!({
            "taskId": "t1", "status": "working", "createdAt": "2025-11-25T00:00:00Z",
            "lastUpdatedAt": "2025-11-25T00:00:00Z", "ttl": 60000
        });
        assert_eq!(
            schema.problems("GetTaskResult", &task),
            Vec::<String>::new()
        );
        let wrong = json!({"taskId": "t1", "status": "running", "createdAt": "x", "ttl": 1});
        assert!(!schema.problems("GetTaskResult", &wrong).is_empty());
        assert!(!schema.problems("NoSuchThing", &task).is_empty());
    }
}
