//! An elicitation's `requestedSchema` as a list of typed fields, and reading
//! a field's value from what a person typed (or a script piped).
//!
//! Elicitation schemas are flat objects of primitives: strings (optionally
//! an enum, as `enum` or `oneOf: [{const, title}]`), numbers, integers,
//! booleans, and arrays of enum strings (multi-select).

use serde_json::{Map, Value, json};

/// What a field holds.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Kind {
    Text,
    Number,
    Integer,
    Boolean,
    /// One of these `(value, title)` choices.
    Choice(Vec<(String, String)>),
    /// Several of these choices (a JSON array).
    Choices(Vec<(String, String)>),
}

/// One field of a form.
#[derive(Debug, Clone)]
pub(crate) struct Field {
    pub name: String,
    pub kind: Kind,
    pub required: bool,
    pub default: Option<Value>,
    pub title: Option<String>,
    pub description: Option<String>,
    schema: Map<String, Value>,
}

impl Field {
    /// How to describe the expected value, e.g. `a number` or `one of: LOW, HIGH`.
    pub(crate) fn expected(&self) -> String {
        match &self.kind {
            Kind::Text => "text".to_owned(),
            Kind::Number => "a number".to_owned(),
            Kind::Integer => "a whole number".to_owned(),
            Kind::Boolean => "yes or no (true/false)".to_owned(),
            Kind::Choice(options) => format!("one of: {}", values(options)),
            Kind::Choices(options) => {
                format!("a comma-separated list of: {}", values(options))
            }
        }
    }

    /// Reads this field's value from `text`: JSON when it parses and fits the
    /// field, else the text itself; enum choices match by value or title,
    /// case-insensitively, or by their 1-based number.
    pub(crate) fn parse(&self, text: &str) -> Result<Value, String> {
        let text = text.trim();
        let json: Option<Value> = serde_json::from_str(text).ok();
        let value = match &self.kind {
            Kind::Text => match json {
                Some(Value::String(s)) => Value::String(s),
                _ => Value::String(text.to_owned()),
            },
            Kind::Number => match json {
                Some(Value::Number(n)) => Value::Number(n),
                _ => return Err(format!("`{text}` is not a number")),
            },
            Kind::Integer => match json {
                Some(Value::Number(n)) if n.is_i64() || n.is_u64() => Value::Number(n),
                _ => return Err(format!("`{text}` is not a whole number")),
            },
            Kind::Boolean => match text.to_ascii_lowercase().as_str() {
                "y" | "yes" | "true" | "1" => Value::Bool(true),
                "n" | "no" | "false" | "0" => Value::Bool(false),
                _ => return Err(format!("`{text}` is not yes or no")),
            },
            Kind::Choice(options) => {
                let s = match json {
                    Some(Value::String(s)) => s,
                    _ => text.to_owned(),
                };
                Value::String(pick(options, &s)?)
            }
            Kind::Choices(options) => {
                let items: Vec<String> = match json {
                    Some(Value::Array(items)) => items
                        .into_iter()
                        .map(|v| match v {
                            Value::String(s) => s,
                            other => other.to_string(),
                        })
                        .collect(),
                    _ if text.is_empty() => Vec::new(),
                    _ => text.split(',').map(|s| s.trim().to_owned()).collect(),
                };
                let picked = items
                    .iter()
                    .map(|s| pick(options, s))
                    .collect::<Result<Vec<_>, _>>()?;
                json!(picked)
            }
        };
        self.check(&value)?;
        Ok(value)
    }

    /// Checks a value against the field's type and bounds.
    pub(crate) fn check(&self, value: &Value) -> Result<(), String> {
        let number = |v: &Value| v.as_f64();
        match (&self.kind, value) {
            (Kind::Text, Value::String(s)) => {
                let len = s.chars().count() as u64;
                if let Some(min) = self.schema.get("minLength").and_then(Value::as_u64)
                    && len < min
                {
                    return Err(format!("needs at least {min} characters"));
                }
                if let Some(max) = self.schema.get("maxLength").and_then(Value::as_u64)
                    && len > max
                {
                    return Err(format!("takes at most {max} characters"));
                }
                Ok(())
            }
            (Kind::Number | Kind::Integer, v) if number(v).is_some() => {
                let n = number(v).unwrap_or_default();
                if let Some(min) = self.schema.get("minimum").and_then(Value::as_f64)
                    && n < min
                {
                    return Err(format!("must be at least {min}"));
                }
                if let Some(max) = self.schema.get("maximum").and_then(Value::as_f64)
                    && n > max
                {
                    return Err(format!("must be at most {max}"));
                }
                Ok(())
            }
            (Kind::Boolean, Value::Bool(_)) => Ok(()),
            (Kind::Choice(options), Value::String(s)) => pick(options, s).map(|_| ()),
            (Kind::Choices(options), Value::Array(items)) => {
                for item in items {
                    pick(options, item.as_str().unwrap_or_default())?;
                }
                Ok(())
            }
            _ => Err(format!("expected {}", self.expected())),
        }
    }

    /// The label shown in prompts: title, else name.
    pub(crate) fn label(&self) -> &str {
        self.title.as_deref().unwrap_or(&self.name)
    }
}

fn values(options: &[(String, String)]) -> String {
    options
        .iter()
        .map(|(v, _)| v.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

fn pick(options: &[(String, String)], s: &str) -> Result<String, String> {
    let s = s.trim();
    if let Some((value, _)) = options
        .iter()
        .find(|(v, t)| v.eq_ignore_ascii_case(s) || t.eq_ignore_ascii_case(s))
    {
        return Ok(value.clone());
    }
    if let Ok(n) = s.parse::<usize>()
        && (1..=options.len()).contains(&n)
    {
        return Ok(options[n - 1].0.clone());
    }
    Err(format!("`{s}` is not one of: {}", values(options)))
}

/// The `(value, title)` choices of an enum schema, if it is one.
fn choices(schema: &Map<String, Value>) -> Option<Vec<(String, String)>> {
    if let Some(Value::Array(values)) = schema.get("enum") {
        let names = schema.get("enumNames").and_then(Value::as_array);
        return Some(
            values
                .iter()
                .enumerate()
                .filter_map(|(i, v)| {
                    let v = v.as_str()?.to_owned();
                    let title = names
                        .and_then(|n| n.get(i)?.as_str())
                        .map_or_else(|| v.clone(), str::to_owned);
                    Some((v, title))
                })
                .collect(),
        );
    }
    let options = schema
        .get("oneOf")
        .or_else(|| schema.get("anyOf"))?
        .as_array()?;
    Some(
        options
            .iter()
            .filter_map(|o| {
                let v = o.get("const")?.as_str()?.to_owned();
                let title = o
                    .get("title")
                    .and_then(Value::as_str)
                    .map_or_else(|| v.clone(), str::to_owned);
                Some((v, title))
            })
            .collect(),
    )
}

/// The fields of a `requestedSchema`: required ones first (in the order the
/// schema lists them), then the rest by name.
pub(crate) fn fields(schema: &Value) -> Result<Vec<Field>, String> {
    let properties = schema
        .get("properties")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let required: Vec<String> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| {
            r.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    let mut out = Vec::new();
    for (name, property) in properties {
        let Value::Object(schema) = property else {
            return Err(format!("field `{name}` has no schema object"));
        };
        let ty = schema
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("string");
        let kind = match ty {
            "string" => choices(&schema).map_or(Kind::Text, Kind::Choice),
            "number" => Kind::Number,
            "integer" => Kind::Integer,
            "boolean" => Kind::Boolean,
            "array" => {
                let items = schema
                    .get("items")
                    .and_then(Value::as_object)
                    .and_then(choices)
                    .ok_or_else(|| {
                        format!("field `{name}` is an array without enum items, which forms cannot ask for")
                    })?;
                Kind::Choices(items)
            }
            other => return Err(format!("field `{name}` has unsupported type `{other}`")),
        };
        out.push(Field {
            required: required.contains(&name),
            default: schema.get("default").cloned(),
            title: schema
                .get("title")
                .and_then(Value::as_str)
                .map(str::to_owned),
            description: schema
                .get("description")
                .and_then(Value::as_str)
                .map(str::to_owned),
            name,
            kind,
            schema,
        });
    }
    out.sort_by_key(|f| {
        (
            required
                .iter()
                .position(|r| *r == f.name)
                .unwrap_or(usize::MAX),
            f.name.clone(),
        )
    });
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ticket() -> Vec<Field> {
        fields(&json!({
            "type": "object",
            "properties": {
                "summary": {"type": "string", "default": "x", "maxLength": 10},
                "priority": {"type": "string", "oneOf": [
                    {"const": "LOW", "title": "Low"}, {"const": "HIGH", "title": "High"}]},
                "count": {"type": "integer", "minimum": 1},
                "ok": {"type": "boolean"},
                "tags": {"type": "array", "items": {"enum": ["a", "b"]}}
            },
            "required": ["summary", "priority"]
        }))
        .expect("valid schema")
    }

    #[test]
    fn required_fields_come_first_in_schema_order() {
        let names: Vec<_> = ticket().into_iter().map(|f| f.name).collect();
        assert_eq!(names, ["summary", "priority", "count", "ok", "tags"]);
    }

    #[test]
    fn values_are_read_by_type_and_checked() {
        let f = ticket();
        assert_eq!(f[0].parse("hello"), Ok(json!("hello")));
        assert_eq!(f[0].parse("\"quoted\""), Ok(json!("quoted")));
        assert!(f[0].parse("far too long text").is_err());
        assert_eq!(f[1].parse("high"), Ok(json!("HIGH")), "by title");
        assert_eq!(f[1].parse("1"), Ok(json!("LOW")), "by number");
        assert!(
            f[1].parse("urgent")
                .expect_err("not an option")
                .contains("LOW, HIGH")
        );
        assert_eq!(f[2].parse("3"), Ok(json!(3)));
        assert!(f[2].parse("0").is_err(), "minimum");
        assert!(f[2].parse("2.5").is_err());
        assert_eq!(f[3].parse("y"), Ok(json!(true)));
        assert_eq!(f[4].parse("a, b"), Ok(json!(["a", "b"])));
        assert_eq!(f[4].parse("[\"b\"]"), Ok(json!(["b"])));
        assert!(f[4].parse("c").is_err());
    }
}
