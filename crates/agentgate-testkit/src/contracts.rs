//! The upstreams' published contracts (`contracts/` at the repository root) as
//! validators, so tests can hold our requests and our emulators' answers to
//! what GitHub publishes rather than to what our client expects. The A2A contract
//! (`contracts/a2a/a2a.proto`) is in `contracts/a2a.rs` ([`a2a()`], [`A2aContract`]);
//! the MCP 2025-11-25 schema in `contracts/mcp.rs` ([`mcp_2025_11_25()`]);
//! MCP Inspector's tool-schema portability rules in `contracts/portability.rs`
//! ([`schema_portability_problems`]).
//!
//! GitHub's REST description is OpenAPI 3.0: `nullable: true` is turned into
//! JSON Schema's `null` type, and every object schema that lists its
//! `properties` gets `unevaluatedProperties: false`, so a field GitHub does not
//! document fails validation (strict), where the published schema alone would
//! let it pass.

mod a2a;
mod mcp;
mod portability;

pub use a2a::{A2aContract, a2a, error_problems};
pub use mcp::{Mcp2025Schema, mcp_2025_11_25};
pub use portability::schema_portability_problems;

use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde_json::{Map, Value, json};

/// `contracts/{relative}` at the repository root, read as JSON.
fn vendored_json(relative: &str) -> Value {
    let path = format!("{}/../../contracts/{relative}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading the vendored contract {path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path} is not JSON: {e}"))
}

/// The REST operations of `contracts/github/rest/operations.json`, keyed by
/// route label (`GET /repos/{owner}/{repo}/pulls/{pull_number}`).
#[derive(Debug)]
pub struct GithubRest {
    operations: BTreeMap<String, Value>,
    components: Value,
}

/// GitHub's REST contract, loaded once per test binary.
pub fn github_rest() -> &'static GithubRest {
    static REST: OnceLock<GithubRest> = OnceLock::new();
    REST.get_or_init(|| {
        let doc = vendored_json("github/rest/operations.json");
        let mut operations = BTreeMap::new();
        for (path, item) in doc["paths"].as_object().expect("paths") {
            for (method, operation) in item.as_object().expect("a path item") {
                let label = format!("{} {path}", method.to_ascii_uppercase());
                operations.insert(label, operation.clone());
            }
        }
        let mut components = doc["components"].clone();
        strict(&mut components, false);
        GithubRest {
            operations,
            components,
        }
    })
}

impl GithubRest {
    /// Whether GitHub documents this operation (`METHOD /path/{template}`).
    pub fn documents(&self, label: &str) -> bool {
        self.operations.contains_key(label)
    }

    /// Every documented route label.
    pub fn labels(&self) -> impl Iterator<Item = &str> {
        self.operations.keys().map(String::as_str)
    }

    /// The problems of `body` as the JSON request body of `label`; empty when
    /// it is documented and valid.
    pub fn request_problems(&self, label: &str, body: &Value) -> Vec<String> {
        let Some(operation) = self.operations.get(label) else {
            return vec![format!("{label} is not a documented operation")];
        };
        let Some(schema) = operation.pointer("/requestBody/content/application~1json/schema")
        else {
            return vec![format!("{label} documents no JSON request body")];
        };
        self.problems(schema, body)
    }

    /// The problems of `body` as the `status` answer of `label`; empty when it
    /// is documented and valid.
    pub fn response_problems(&self, label: &str, status: u16, body: &Value) -> Vec<String> {
        let Some(operation) = self.operations.get(label) else {
            return vec![format!("{label} is not a documented operation")];
        };
        let Some(mut response) = operation.pointer(&format!("/responses/{status}")) else {
            return vec![format!("{label} documents no {status} answer")];
        };
        if let Some(target) = response.get("$ref").and_then(Value::as_str) {
            let Some(pointer) = target.strip_prefix("#/components") else {
                return vec![format!("{label}: unexpected reference {target}")];
            };
            match self.components.pointer(pointer) {
                Some(resolved) => response = resolved,
                None => return vec![format!("{label}: dangling reference {target}")],
            }
        }
        let Some(schema) = response.pointer("/content/application~1json/schema") else {
            return vec![format!("{label} documents no JSON body for {status}")];
        };
        self.problems(schema, body)
    }

    fn problems(&self, schema: &Value, body: &Value) -> Vec<String> {
        let mut schema = schema.clone();
        strict(&mut schema, false);
        // References are `#/components/…`: the schema is validated as part of
        // a document that holds the components at that place.
        let root = json!({ "allOf": [schema], "components": self.components });
        let validator = match jsonschema::validator_for(&root) {
            Ok(v) => v,
            Err(e) => return vec![format!("the vendored schema does not compile: {e}")],
        };
        validator
            .iter_errors(body)
            .map(|e| format!("{e} at {}", e.instance_path()))
            .collect()
    }
}

/// OpenAPI 3.0 to JSON Schema 2020-12, strict about undocumented fields. An
/// `allOf` member is not made strict on its own (its siblings' properties
/// would be unknown to it); the object holding the `allOf` is.
fn strict(schema: &mut Value, in_all_of: bool) {
    match schema {
        Value::Object(map) => {
            if map.remove("nullable") == Some(Value::Bool(true)) {
                allow_null(map);
            }
            let lists_properties = map.contains_key("properties") || map.contains_key("allOf");
            if lists_properties
                && !in_all_of
                && !map.contains_key("additionalProperties")
                && !map.contains_key("patternProperties")
            {
                map.insert("unevaluatedProperties".into(), Value::Bool(false));
            }
            for (key, value) in map.iter_mut() {
                match key.as_str() {
                    "allOf" => {
                        if let Value::Array(members) = value {
                            members.iter_mut().for_each(|m| strict(m, true));
                        }
                    }
                    // Names of properties and examples are data, not schemas.
                    "example" | "examples" | "enum" | "const" | "default" => {}
                    "properties" => {
                        if let Value::Object(props) = value {
                            props.values_mut().for_each(|p| strict(p, false));
                        }
                    }
                    _ => strict(value, false),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|i| strict(i, false)),
        _ => {}
    }
}

/// `nullable: true` on a schema: `null` is valid too.
fn allow_null(map: &mut Map<String, Value>) {
    match map.get_mut("type") {
        Some(Value::String(t)) => {
            let t = t.clone();
            map.insert("type".into(), json!([t, "null"]));
            if let Some(Value::Array(values)) = map.get_mut("enum") {
                values.push(Value::Null);
            }
        }
        _ => {
            let inner = Value::Object(std::mem::take(map));
            map.insert("anyOf".into(), json!([{ "type": "null" }, inner]));
        }
    }
}

/// botocore's Q Business service model (`contracts/aws/qbusiness/`): the
/// shapes the restJson1 wire carries.
#[derive(Debug)]
pub struct QBusinessModel {
    operations: Map<String, Value>,
    shapes: Map<String, Value>,
}

/// The Q Business service model, loaded once per test binary.
pub fn qbusiness_model() -> &'static QBusinessModel {
    static MODEL: OnceLock<QBusinessModel> = OnceLock::new();
    MODEL.get_or_init(|| {
        let mut doc = vendored_json("aws/qbusiness/service-2.json");
        let take = |doc: &mut Value, key: &str| match doc.get_mut(key).map(Value::take) {
            Some(Value::Object(map)) => map,
            _ => panic!("service-2.json has no {key}"),
        };
        QBusinessModel {
            operations: take(&mut doc, "operations"),
            shapes: take(&mut doc, "shapes"),
        }
    })
}

impl QBusinessModel {
    /// The problems of a JSON response body of `operation`: its output shape
    /// for a 2xx `status`, else the error shape named `error_type` (the
    /// `x-amzn-ErrorType` header), which must be one the operation declares.
    /// Members bound to headers are not expected in the body; a member the
    /// model does not know is a problem.
    pub fn response_problems(
        &self,
        operation: &str,
        status: u16,
        error_type: Option<&str>,
        body: &Value,
    ) -> Vec<String> {
        let Some(op) = self.operations.get(operation) else {
            return vec![format!("{operation} is not an operation of the model")];
        };
        let shape = if (200..300).contains(&status) {
            op.pointer("/output/shape").and_then(Value::as_str)
        } else {
            let Some(error) = error_type else {
                return vec![format!(
                    "a {status} answer of {operation} names no error type"
                )];
            };
            let declared = op["errors"]
                .as_array()
                .is_some_and(|e| e.iter().any(|e| e["shape"] == error));
            if !declared {
                return vec![format!("{operation} does not declare the error {error}")];
            }
            Some(error)
        };
        let Some(shape) = shape else {
            return vec![format!("{operation} has no output shape")];
        };
        let mut problems = Vec::new();
        self.check(shape, body, "", &mut problems);
        problems
    }

    fn check(&self, name: &str, value: &Value, at: &str, problems: &mut Vec<String>) {
        let Some(shape) = self.shapes.get(name) else {
            problems.push(format!("{at}: unknown shape {name}"));
            return;
        };
        // A document (`"document": true`) is any JSON.
        if shape["document"] == Value::Bool(true) {
            return;
        }
        let mut wrong = |expected: &str| {
            problems.push(format!("{at}: {value} is not {expected} (shape {name})"));
        };
        match shape["type"].as_str().unwrap_or_default() {
            "structure" => {
                let Some(object) = value.as_object() else {
                    return wrong("an object");
                };
                let members = shape["members"].as_object().cloned().unwrap_or_default();
                let in_body = |m: &Value| m.get("location").is_none();
                for required in shape["required"].as_array().into_iter().flatten() {
                    let key = required.as_str().unwrap_or_default();
                    if members.get(key).is_some_and(in_body) && !object.contains_key(key) {
                        problems.push(format!("{at}: required member {key} missing ({name})"));
                    }
                }
                let union = shape["union"] == Value::Bool(true);
                if union && object.len() != 1 {
                    problems.push(format!("{at}: a union holds exactly one member ({name})"));
                }
                for (key, member_value) in object {
                    match members.get(key) {
                        Some(member) if in_body(member) => {
                            let target = member["shape"].as_str().unwrap_or_default();
                            self.check(target, member_value, &format!("{at}/{key}"), problems);
                        }
                        _ => problems.push(format!("{at}: {key} is not a member of {name}")),
                    }
                }
            }
            "list" => {
                let Some(items) = value.as_array() else {
                    return wrong("a list");
                };
                self.check_length(shape, items.len(), at, problems);
                let member = shape.pointer("/member/shape").and_then(Value::as_str);
                for (i, item) in items.iter().enumerate() {
                    self.check(
                        member.unwrap_or_default(),
                        item,
                        &format!("{at}/{i}"),
                        problems,
                    );
                }
            }
            "map" => {
                let Some(entries) = value.as_object() else {
                    return wrong("a map");
                };
                let target = shape.pointer("/value/shape").and_then(Value::as_str);
                for (key, entry) in entries {
                    self.check(
                        target.unwrap_or_default(),
                        entry,
                        &format!("{at}/{key}"),
                        problems,
                    );
                }
            }
            "string" => {
                let Some(text) = value.as_str() else {
                    return wrong("a string");
                };
                if let Some(allowed) = shape["enum"].as_array()
                    && !allowed.iter().any(|a| a == value)
                {
                    problems.push(format!("{at}: {text:?} is not one of {allowed:?} ({name})"));
                }
                self.check_length(shape, text.chars().count(), at, problems);
            }
            scalar => {
                if let Some(expected) = scalar_mismatch(scalar, shape, value) {
                    wrong(expected);
                }
            }
        }
    }

    fn check_length(&self, shape: &Value, len: usize, at: &str, problems: &mut Vec<String>) {
        let len = len as u64;
        if let Some(min) = shape["min"].as_u64()
            && len < min
        {
            problems.push(format!("{at}: length {len} is under the minimum {min}"));
        }
        if let Some(max) = shape["max"].as_u64()
            && len > max
        {
            problems.push(format!("{at}: length {len} is over the maximum {max}"));
        }
    }
}

/// What a scalar of `kind` should have been, when `value` is not one.
fn scalar_mismatch(kind: &str, shape: &Value, value: &Value) -> Option<&'static str> {
    let (fits, expected) = match kind {
        "integer" | "long" => (value.is_i64() || value.is_u64(), "an integer"),
        "float" | "double" => (value.is_number(), "a number"),
        "boolean" => (value.is_boolean(), "a boolean"),
        // restJson1 writes timestamps as epoch seconds unless the shape says otherwise.
        "timestamp" if shape["timestampFormat"] == "iso8601" => {
            (value.is_string(), "an ISO 8601 string")
        }
        "timestamp" => (value.is_number(), "epoch seconds"),
        "blob" => (value.is_string(), "base64 text"),
        // A document is any JSON.
        _ => (true, ""),
    };
    (!fits).then_some(expected)
}
