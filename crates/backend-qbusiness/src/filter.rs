//! `attribute_filter`: Q Business's recursive AttributeFilter, written as JSON
//! by the caller and checked here field by field, so a mistake is reported
//! with its path (`attribute_filter.andAllFilters[1].equalsTo.value`) instead
//! of as an opaque upstream ValidationException.

use aws_sdk_qbusiness::primitives::DateTime;
use aws_sdk_qbusiness::types::{AttributeFilter, DocumentAttribute, DocumentAttributeValue};
use serde_json::{Map, Value};

const OPERATORS: &[&str] = &[
    "andAllFilters",
    "orAllFilters",
    "notFilter",
    "equalsTo",
    "containsAll",
    "containsAny",
    "greaterThan",
    "greaterThanOrEquals",
    "lessThan",
    "lessThanOrEquals",
];

/// Parses a filter; `path` names it in errors.
pub fn parse(value: &Value, path: &str) -> Result<AttributeFilter, String> {
    let object = value.as_object().ok_or_else(|| {
        format!(
            "`{path}` must be an object with one of: {}",
            OPERATORS.join(", ")
        )
    })?;
    let mut entries = object.iter();
    let (Some((op, inner)), None) = (entries.next(), entries.next()) else {
        return Err(format!(
            "`{path}` must have exactly one operator key, one of: {}",
            OPERATORS.join(", ")
        ));
    };
    let here = format!("{path}.{op}");
    let builder = AttributeFilter::builder();
    let builder = match op.as_str() {
        "andAllFilters" | "orAllFilters" => {
            let list = inner
                .as_array()
                .ok_or_else(|| format!("`{here}` must be an array of filters"))?;
            let filters = list
                .iter()
                .enumerate()
                .map(|(i, f)| parse(f, &format!("{here}[{i}]")))
                .collect::<Result<Vec<_>, _>>()?;
            if op == "andAllFilters" {
                builder.set_and_all_filters(Some(filters))
            } else {
                builder.set_or_all_filters(Some(filters))
            }
        }
        "notFilter" => builder.not_filter(parse(inner, &here)?),
        "equalsTo" => builder.equals_to(attribute(inner, &here)?),
        "containsAll" => builder.contains_all(attribute(inner, &here)?),
        "containsAny" => builder.contains_any(attribute(inner, &here)?),
        "greaterThan" => builder.greater_than(attribute(inner, &here)?),
        "greaterThanOrEquals" => builder.greater_than_or_equals(attribute(inner, &here)?),
        "lessThan" => builder.less_than(attribute(inner, &here)?),
        "lessThanOrEquals" => builder.less_than_or_equals(attribute(inner, &here)?),
        other => {
            return Err(format!(
                "`{path}` has unknown operator `{other}`; use one of: {}",
                OPERATORS.join(", ")
            ));
        }
    };
    Ok(builder.build())
}

fn attribute(value: &Value, path: &str) -> Result<DocumentAttribute, String> {
    let object = value
        .as_object()
        .ok_or_else(|| format!("`{path}` must be an object {{\"name\": ..., \"value\": ...}}"))?;
    let name = object
        .get("name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .ok_or_else(|| format!("`{path}.name` must be a non-empty string"))?;
    if let Some(extra) = object.keys().find(|k| *k != "name" && *k != "value") {
        return Err(format!(
            "`{path}` has unknown key `{extra}`; expected name and value"
        ));
    }
    let value = object
        .get("value")
        .and_then(Value::as_object)
        .ok_or_else(|| format!("`{path}.value` must be an object with one of stringValue, stringListValue, longValue, dateValue"))?;
    DocumentAttribute::builder()
        .name(name)
        .value(attribute_value(value, &format!("{path}.value"))?)
        .build()
        .map_err(|e| format!("`{path}`: {e}"))
}

fn attribute_value(
    value: &Map<String, Value>,
    path: &str,
) -> Result<DocumentAttributeValue, String> {
    let mut entries = value.iter();
    let (Some((kind, inner)), None) = (entries.next(), entries.next()) else {
        return Err(format!(
            "`{path}` must have exactly one of stringValue, stringListValue, longValue, dateValue"
        ));
    };
    let here = format!("{path}.{kind}");
    match kind.as_str() {
        "stringValue" => inner
            .as_str()
            .map(|s| DocumentAttributeValue::StringValue(s.to_owned()))
            .ok_or_else(|| format!("`{here}` must be a string")),
        "stringListValue" => inner
            .as_array()
            .and_then(|items| {
                items
                    .iter()
                    .map(|i| i.as_str().map(str::to_owned))
                    .collect()
            })
            .map(DocumentAttributeValue::StringListValue)
            .ok_or_else(|| format!("`{here}` must be an array of strings")),
        "longValue" => inner
            .as_i64()
            .map(DocumentAttributeValue::LongValue)
            .ok_or_else(|| format!("`{here}` must be an integer")),
        "dateValue" => {
            let date = match inner {
                Value::Number(n) => n.as_f64().map(DateTime::from_secs_f64),
                Value::String(s) => {
                    DateTime::from_str(s, aws_sdk_qbusiness::primitives::DateTimeFormat::DateTime)
                        .ok()
                }
                _ => None,
            };
            date.map(DocumentAttributeValue::DateValue).ok_or_else(|| {
                format!(
                    "`{here}` must be epoch seconds or an RFC 3339 date like 2026-01-31T00:00:00Z"
                )
            })
        }
        other => Err(format!(
            "`{path}` has unknown kind `{other}`; use stringValue, stringListValue, longValue or dateValue"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn nested_filters_parse() {
        let f = parse(
            &json!({"andAllFilters": [
                {"equalsTo": {"name": "_category", "value": {"stringValue": "HR"}}},
                {"notFilter": {"greaterThan": {"name": "_created_at", "value": {"dateValue": "2026-01-01T00:00:00Z"}}}}
            ]}),
            "attribute_filter",
        )
        .expect("valid filter");
        assert_eq!(f.and_all_filters().len(), 2);
    }

    #[test]
    fn errors_name_the_path() {
        let err = parse(
            &json!({"orAllFilters": [{"equalsTo": {"name": "x", "value": {"longValue": "7"}}}]}),
            "attribute_filter",
        )
        .expect_err("wrong type");
        assert!(
            err.contains("attribute_filter.orAllFilters[0].equalsTo.value.longValue"),
            "{err}"
        );
        let err = parse(&json!({"equals": {}}), "attribute_filter").expect_err("unknown op");
        assert!(err.contains("unknown operator `equals`"), "{err}");
    }
}
