//! Plugin action reviews: ChatSync's `actionReview` turned into an MCP
//! elicitation form, and the approved form turned back into `actionExecution`.
//!
//! Each payload field becomes one form property: its `displayName` is the
//! title, `displayDescription` the description, `type` the JSON type
//! (ARRAY fields are asked for as JSON text), `allowedValues` a titled enum,
//! `required` the required list and the current `value` the default. Fields
//! the form leaves out keep the value Q Business proposed.

use aws_sdk_qbusiness::types::{ActionExecution, ActionExecutionPayloadField, ActionReview};
use aws_smithy_types::{Document, Number};
use rmcp::model::{ElicitRequest, ElicitRequestParams, InputRequest};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// A proposed plugin action, as data (it is checkpointed with the task).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReviewForm {
    pub plugin_id: String,
    pub plugin_type: Option<String>,
    pub separator: String,
    pub fields: Vec<ReviewField>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReviewField {
    /// The payload key.
    pub name: String,
    pub display_name: Option<String>,
    pub description: Option<String>,
    /// STRING, NUMBER, BOOLEAN or ARRAY.
    pub kind: String,
    pub required: bool,
    /// The value Q Business proposes.
    pub value: Option<Value>,
    pub allowed_values: Vec<AllowedValue>,
    pub allowed_format: Option<String>,
    pub display_order: Option<i32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AllowedValue {
    pub value: Value,
    pub display: Option<Value>,
}

/// A Smithy document as JSON.
pub fn document_to_json(doc: &Document) -> Value {
    match doc {
        Document::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), document_to_json(v)))
                .collect(),
        ),
        Document::Array(items) => Value::Array(items.iter().map(document_to_json).collect()),
        Document::Number(Number::PosInt(n)) => json!(n),
        Document::Number(Number::NegInt(n)) => json!(n),
        Document::Number(Number::Float(f)) => json!(f),
        Document::String(s) => Value::String(s.clone()),
        Document::Bool(b) => Value::Bool(*b),
        Document::Null => Value::Null,
    }
}

/// JSON as a Smithy document.
pub fn json_to_document(value: &Value) -> Document {
    match value {
        Value::Object(map) => Document::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), json_to_document(v)))
                .collect(),
        ),
        Value::Array(items) => Document::Array(items.iter().map(json_to_document).collect()),
        Value::Number(n) => Document::Number(if let Some(u) = n.as_u64() {
            Number::PosInt(u)
        } else if let Some(i) = n.as_i64() {
            Number::NegInt(i)
        } else {
            Number::Float(n.as_f64().unwrap_or_default())
        }),
        Value::String(s) => Document::String(s.clone()),
        Value::Bool(b) => Document::Bool(*b),
        Value::Null => Document::Null,
    }
}

fn label(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

impl ReviewForm {
    pub fn from_review(review: &ActionReview) -> Self {
        let mut fields: Vec<ReviewField> = review
            .payload()
            .into_iter()
            .flatten()
            .map(|(name, f)| ReviewField {
                name: name.clone(),
                display_name: f.display_name().map(str::to_owned),
                description: f.display_description().map(str::to_owned),
                kind: f
                    .r#type()
                    .map(|t| t.as_str().to_owned())
                    .unwrap_or_else(|| "STRING".into()),
                required: f.required().unwrap_or(false),
                value: f.value().map(document_to_json),
                allowed_values: f
                    .allowed_values()
                    .iter()
                    .filter_map(|a| {
                        Some(AllowedValue {
                            value: document_to_json(a.value()?),
                            display: a.display_value().map(document_to_json),
                        })
                    })
                    .collect(),
                allowed_format: f.allowed_format().map(str::to_owned),
                display_order: f.display_order(),
            })
            .collect();
        fields.sort_by(|a, b| {
            (a.display_order.unwrap_or(i32::MAX), &a.name)
                .cmp(&(b.display_order.unwrap_or(i32::MAX), &b.name))
        });
        Self {
            plugin_id: review.plugin_id().unwrap_or_default().to_owned(),
            plugin_type: review.plugin_type().map(|t| t.as_str().to_owned()),
            separator: review
                .payload_field_name_separator()
                .unwrap_or(".")
                .to_owned(),
            fields,
        }
    }

    /// The form a client shows the user.
    pub fn to_elicitation(&self, answer: &str) -> Result<InputRequest, String> {
        let mut properties = Map::new();
        let mut required = Vec::new();
        for field in &self.fields {
            let mut schema = Map::new();
            let title = field
                .display_name
                .clone()
                .unwrap_or_else(|| field.name.clone());
            schema.insert("title".into(), json!(title));
            let mut description = field.description.clone().unwrap_or_default();
            if let Some(format) = &field.allowed_format {
                description = format!("{description} (format: {format})")
                    .trim()
                    .to_owned();
            }
            if !field.allowed_values.is_empty() {
                let options: Vec<Value> = field
                    .allowed_values
                    .iter()
                    .map(|a| {
                        json!({"const": label(&a.value),
                               "title": a.display.as_ref().map(label).unwrap_or_else(|| label(&a.value))})
                    })
                    .collect();
                schema.insert("type".into(), json!("string"));
                schema.insert("oneOf".into(), Value::Array(options));
                if let Some(v) = &field.value {
                    schema.insert("default".into(), json!(label(v)));
                }
            } else {
                match field.kind.as_str() {
                    "NUMBER" => {
                        schema.insert("type".into(), json!("number"));
                        if let Some(v) = field.value.as_ref().filter(|v| v.is_number()) {
                            schema.insert("default".into(), v.clone());
                        }
                    }
                    "BOOLEAN" => {
                        schema.insert("type".into(), json!("boolean"));
                        if let Some(v) = field.value.as_ref().filter(|v| v.is_boolean()) {
                            schema.insert("default".into(), v.clone());
                        }
                    }
                    "ARRAY" => {
                        schema.insert("type".into(), json!("string"));
                        description = format!("{description} (a JSON array)").trim().to_owned();
                        if let Some(v) = &field.value {
                            schema.insert("default".into(), json!(v.to_string()));
                        }
                    }
                    _ => {
                        schema.insert("type".into(), json!("string"));
                        if let Some(v) = &field.value {
                            schema.insert("default".into(), json!(label(v)));
                        }
                    }
                }
            }
            if !description.is_empty() {
                schema.insert("description".into(), json!(description));
            }
            if field.required {
                required.push(json!(field.name));
            }
            properties.insert(field.name.clone(), Value::Object(schema));
        }
        let plugin = self.plugin_type.as_deref().unwrap_or("plugin");
        let message = format!(
            "Amazon Q Business wants to run a {plugin} action. Review the details and accept to \
             run it, or decline.\n\n{answer}"
        );
        let requested_schema = serde_json::from_value(
            json!({"type": "object", "properties": properties, "required": required}),
        )
        .map_err(|e| format!("the action review cannot be shown as a form: {e}"))?;
        Ok(InputRequest::Elicitation(ElicitRequest::new(
            ElicitRequestParams::FormElicitationParams {
                meta: None,
                message,
                requested_schema,
            },
        )))
    }

    /// The `actionExecution` for an accepted form; the error names the field.
    pub fn execution(&self, content: &Map<String, Value>) -> Result<ActionExecution, String> {
        let mut builder = ActionExecution::builder()
            .plugin_id(&self.plugin_id)
            .payload_field_name_separator(&self.separator);
        for field in &self.fields {
            let given = content.get(&field.name).filter(|v| !v.is_null());
            let value = match given {
                None => match &field.value {
                    Some(v) => v.clone(),
                    None if field.required => {
                        return Err(format!("required field `{}` was not filled in", field.name));
                    }
                    None => continue,
                },
                Some(v) => self.convert(field, v)?,
            };
            let payload = ActionExecutionPayloadField::builder()
                .value(json_to_document(&value))
                .build()
                .map_err(|e| format!("field `{}`: {e}", field.name))?;
            builder = builder.payload(field.name.clone(), payload);
        }
        builder
            .build()
            .map_err(|e| format!("the action cannot be sent: {e}"))
    }

    fn convert(&self, field: &ReviewField, given: &Value) -> Result<Value, String> {
        if !field.allowed_values.is_empty() {
            let chosen = label(given);
            return field
                .allowed_values
                .iter()
                .find(|a| label(&a.value) == chosen)
                .map(|a| a.value.clone())
                .ok_or_else(|| {
                    format!(
                        "field `{}`: {chosen:?} is not one of the allowed values",
                        field.name
                    )
                });
        }
        match (field.kind.as_str(), given) {
            ("NUMBER", Value::Number(_)) | ("BOOLEAN", Value::Bool(_)) => Ok(given.clone()),
            ("ARRAY", Value::Array(_)) => Ok(given.clone()),
            ("ARRAY", Value::String(text)) => match serde_json::from_str::<Value>(text) {
                Ok(array @ Value::Array(_)) => Ok(array),
                _ => Err(format!("field `{}` must be a JSON array", field.name)),
            },
            ("STRING", Value::String(_)) => Ok(given.clone()),
            (kind, other) => Err(format!(
                "field `{}` must be a {kind} value, got {other}",
                field.name
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_qbusiness::types::{
        ActionPayloadFieldType, ActionReviewPayloadField, ActionReviewPayloadFieldAllowedValue,
    };

    fn review() -> ActionReview {
        let priority = ActionReviewPayloadField::builder()
            .display_name("Priority")
            .display_order(2)
            .r#type(ActionPayloadFieldType::String)
            .required(true)
            .value(Document::String("MEDIUM".into()))
            .allowed_values(
                ActionReviewPayloadFieldAllowedValue::builder()
                    .value(Document::String("LOW".into()))
                    .display_value(Document::String("Low".into()))
                    .build(),
            )
            .allowed_values(
                ActionReviewPayloadFieldAllowedValue::builder()
                    .value(Document::String("MEDIUM".into()))
                    .build(),
            )
            .build();
        let summary = ActionReviewPayloadField::builder()
            .display_name("Summary")
            .display_order(1)
            .r#type(ActionPayloadFieldType::String)
            .required(true)
            .value(Document::String("VPN broken".into()))
            .build();
        ActionReview::builder()
            .plugin_id("0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b")
            .payload_field_name_separator(".")
            .payload("priority", priority)
            .payload("summary", summary)
            .build()
    }

    #[test]
    fn form_keeps_order_enums_defaults_and_required() {
        let form = ReviewForm::from_review(&review());
        assert_eq!(form.fields[0].name, "summary");
        let InputRequest::Elicitation(request) = form.to_elicitation("Review it").expect("form")
        else {
            panic!("expected an elicitation")
        };
        let json = serde_json::to_value(&request.params).expect("json");
        let schema = &json["requestedSchema"];
        assert_eq!(
            schema["properties"]["summary"]["default"],
            json!("VPN broken")
        );
        assert_eq!(
            schema["properties"]["priority"]["oneOf"][0]["title"],
            json!("Low")
        );
        assert_eq!(schema["required"], json!(["summary", "priority"]));
    }

    #[test]
    fn execution_uses_answers_and_defaults_and_rejects_bad_choices() {
        let form = ReviewForm::from_review(&review());
        let mut content = Map::new();
        content.insert("priority".into(), json!("LOW"));
        let exec = form.execution(&content).expect("execution");
        assert_eq!(
            exec.payload()["priority"].value(),
            &Document::String("LOW".into())
        );
        assert_eq!(
            exec.payload()["summary"].value(),
            &Document::String("VPN broken".into())
        );
        content.insert("priority".into(), json!("URGENT"));
        let err = form.execution(&content).expect_err("not allowed");
        assert!(err.contains("`priority`"), "{err}");
    }
}
