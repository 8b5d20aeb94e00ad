//! The tool definitions the conformance scenarios name, beyond the plain
//! no-argument tools: JSON Schemas and the custom-header and 2020-12 schema
//! fixtures.

use super::*;

/// A JSON object literal as a schema (non-objects become `{}`).
pub(super) fn schema(value: Value) -> JsonObject {
    match value {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    }
}

/// SEP-2243 custom-header fixture: `value` is mirrored into `Mcp-Param-Value`.
pub(super) fn custom_header_tool() -> Tool {
    Tool::new(
        "test_custom_header",
        "Echoes `value`, which clients also send as the Mcp-Param-Value header (SEP-2243)",
        schema(json!({
            "type": "object",
            "properties": {
                "value": { "type": "string", "x-mcp-header": "Value" }
            },
            "required": ["value"]
        })),
    )
}

/// SEP-1613/SEP-2106 fixture: an input schema using the 2020-12 vocabulary,
/// which must survive `tools/list` unchanged.
pub(super) fn json_schema_2020_12_tool() -> Tool {
    Tool::new(
        "json_schema_2020_12_tool",
        "Greets `name`; its input schema exercises JSON Schema 2020-12 keywords",
        schema(json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "$defs": {
                "address": {
                    "$anchor": "addressDef",
                    "type": "object",
                    "properties": {
                        "street": { "type": "string" },
                        "city": { "type": "string" }
                    }
                }
            },
            "properties": {
                "name": { "type": "string" },
                "address": { "$ref": "#/$defs/address" },
                "contactMethod": { "type": "string", "enum": ["phone", "email"] },
                "phone": { "type": "string" },
                "email": { "type": "string" }
            },
            "allOf": [{ "anyOf": [{ "required": ["phone"] }, { "required": ["email"] }] }],
            "if": {
                "properties": { "contactMethod": { "const": "phone" } },
                "required": ["contactMethod"]
            },
            "then": { "required": ["phone"] },
            "else": { "required": ["email"] },
            "additionalProperties": false
        })),
    )
}
