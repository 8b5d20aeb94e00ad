//! `attributeFilter`: its wire shape, its validation and its evaluation against the
//! corpus documents.
//!
//! Each document has the attributes `_document_title`, `_source_uri`, `_category`
//! (strings), `_last_updated_at` (date) and `_document_id` (string). A comparison
//! against any other attribute name is false. `containsAll` / `containsAny` compare a
//! `stringListValue` with a string attribute (treated as a one-element list).

use serde::{Deserialize, Serialize};

use super::corpus::Document;
use super::errors::FieldError;

/// Deepest nesting of `andAllFilters` / `orAllFilters` / `notFilter` accepted.
pub(super) const MAX_DEPTH: usize = 10;

/// `AttributeFilter` (recursive).
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub(super) struct AttributeFilter {
    /// All must match.
    pub and_all_filters: Option<Vec<AttributeFilter>>,
    /// One must match.
    pub or_all_filters: Option<Vec<AttributeFilter>>,
    /// Must not match.
    pub not_filter: Option<Box<AttributeFilter>>,
    /// Attribute equals value.
    pub equals_to: Option<DocumentAttribute>,
    /// Attribute contains all listed strings.
    pub contains_all: Option<DocumentAttribute>,
    /// Attribute contains one of the listed strings.
    pub contains_any: Option<DocumentAttribute>,
    /// Attribute > value.
    pub greater_than: Option<DocumentAttribute>,
    /// Attribute >= value.
    pub greater_than_or_equals: Option<DocumentAttribute>,
    /// Attribute < value.
    pub less_than: Option<DocumentAttribute>,
    /// Attribute <= value.
    pub less_than_or_equals: Option<DocumentAttribute>,
}

/// `DocumentAttribute`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub(super) struct DocumentAttribute {
    /// Attribute name, 1-200 characters, `[a-zA-Z0-9_][a-zA-Z0-9_-]*`.
    pub name: Option<String>,
    /// The value (a union: exactly one member).
    pub value: Option<DocumentAttributeValue>,
}

/// `DocumentAttributeValue` (union).
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub(super) struct DocumentAttributeValue {
    /// A string (at most 2048 characters).
    pub string_value: Option<String>,
    /// A list of strings.
    pub string_list_value: Option<Vec<String>>,
    /// An integer.
    pub long_value: Option<i64>,
    /// Epoch seconds.
    pub date_value: Option<f64>,
}

fn is_attribute_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// Validates a filter; errors name the JSON path below `path`.
pub(super) fn validate(
    filter: &AttributeFilter,
    path: &str,
    depth: usize,
    errors: &mut Vec<FieldError>,
) {
    if depth > MAX_DEPTH {
        errors.push(FieldError::new(
            path,
            format!("Member must not be nested more than {MAX_DEPTH} levels deep"),
        ));
        return;
    }
    let mut set = 0;
    for (key, list) in [
        ("andAllFilters", &filter.and_all_filters),
        ("orAllFilters", &filter.or_all_filters),
    ] {
        if let Some(list) = list {
            set += 1;
            for (i, f) in list.iter().enumerate() {
                validate(f, &format!("{path}.{key}[{i}]"), depth + 1, errors);
            }
        }
    }
    if let Some(not) = &filter.not_filter {
        set += 1;
        validate(not, &format!("{path}.notFilter"), depth + 1, errors);
    }
    for (key, attr) in comparisons(filter) {
        if let Some(attr) = attr {
            set += 1;
            validate_attribute(attr, &format!("{path}.{key}"), key, errors);
        }
    }
    if set == 0 {
        errors.push(FieldError::new(
            path,
            "Member must have at least one filter member set",
        ));
    }
}

fn comparisons(filter: &AttributeFilter) -> [(&'static str, &Option<DocumentAttribute>); 7] {
    [
        ("equalsTo", &filter.equals_to),
        ("containsAll", &filter.contains_all),
        ("containsAny", &filter.contains_any),
        ("greaterThan", &filter.greater_than),
        ("greaterThanOrEquals", &filter.greater_than_or_equals),
        ("lessThan", &filter.less_than),
        ("lessThanOrEquals", &filter.less_than_or_equals),
    ]
}

fn validate_attribute(
    attr: &DocumentAttribute,
    path: &str,
    op: &str,
    errors: &mut Vec<FieldError>,
) {
    match attr.name.as_deref() {
        None => errors.push(FieldError::new(
            format!("{path}.name"),
            "Member must not be null",
        )),
        Some(name) if name.is_empty() || name.len() > 200 => errors.push(FieldError::new(
            format!("{path}.name"),
            "Member must have length between 1 and 200",
        )),
        Some(name) if !is_attribute_name(name) => errors.push(FieldError::new(
            format!("{path}.name"),
            "Member must satisfy regular expression pattern: [a-zA-Z0-9_][a-zA-Z0-9_-]*",
        )),
        Some(_) => {}
    }
    let Some(value) = &attr.value else {
        errors.push(FieldError::new(
            format!("{path}.value"),
            "Member must not be null",
        ));
        return;
    };
    let members = [
        value.string_value.is_some(),
        value.string_list_value.is_some(),
        value.long_value.is_some(),
        value.date_value.is_some(),
    ]
    .iter()
    .filter(|s| **s)
    .count();
    if members != 1 {
        errors.push(FieldError::new(
            format!("{path}.value"),
            "Member must have exactly one of stringValue, stringListValue, longValue, dateValue set",
        ));
        return;
    }
    if value.string_value.as_ref().is_some_and(|s| s.len() > 2048) {
        errors.push(FieldError::new(
            format!("{path}.value.stringValue"),
            "Member must have length less than or equal to 2048",
        ));
    }
    if matches!(op, "containsAll" | "containsAny") && value.string_list_value.is_none() {
        errors.push(FieldError::new(
            format!("{path}.value"),
            format!("{op} requires a stringListValue"),
        ));
    }
}

#[derive(Debug, PartialEq, PartialOrd)]
enum Attr<'a> {
    Text(&'a str),
    Number(f64),
}

fn attribute<'a>(doc: &'a Document, name: &str) -> Option<Attr<'a>> {
    match name {
        "_document_title" => Some(Attr::Text(&doc.title)),
        "_source_uri" => Some(Attr::Text(&doc.url)),
        "_category" => Some(Attr::Text(&doc.category)),
        "_document_id" => Some(Attr::Text(&doc.id)),
        "_last_updated_at" => Some(Attr::Number(doc.updated_at as f64)),
        _ => None,
    }
}

fn filter_value(v: &DocumentAttributeValue) -> Option<Attr<'_>> {
    if let Some(s) = &v.string_value {
        Some(Attr::Text(s))
    } else if let Some(n) = v.long_value {
        Some(Attr::Number(n as f64))
    } else {
        v.date_value.map(Attr::Number)
    }
}

/// Whether `doc` passes the (validated) filter.
pub(super) fn matches(filter: &AttributeFilter, doc: &Document) -> bool {
    if let Some(list) = &filter.and_all_filters
        && !list.iter().all(|f| matches(f, doc))
    {
        return false;
    }
    if let Some(list) = &filter.or_all_filters
        && !list.iter().any(|f| matches(f, doc))
    {
        return false;
    }
    if let Some(not) = &filter.not_filter
        && matches(not, doc)
    {
        return false;
    }
    for (op, attr) in comparisons(filter) {
        let Some(attr) = attr else { continue };
        let (Some(name), Some(value)) = (&attr.name, &attr.value) else {
            return false;
        };
        let Some(have) = attribute(doc, name) else {
            return false;
        };
        let ok = match op {
            "containsAll" | "containsAny" => {
                let wanted = value.string_list_value.as_deref().unwrap_or_default();
                let has = |w: &String| have == Attr::Text(w);
                if op == "containsAll" {
                    wanted.iter().all(has)
                } else {
                    wanted.iter().any(has)
                }
            }
            _ => {
                let Some(want) = filter_value(value) else {
                    return false;
                };
                match op {
                    "equalsTo" => have == want,
                    "greaterThan" => have > want,
                    "greaterThanOrEquals" => have >= want,
                    "lessThan" => have < want,
                    _ => have <= want,
                }
            }
        };
        if !ok {
            return false;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc() -> Document {
        Document {
            id: "nwr-hr-0001".into(),
            title: "Holiday and vacation policy".into(),
            url: "https://intranet.northwind.example/holiday-policy".into(),
            category: "HR".into(),
            updated_at: 1_736_931_600,
            paragraphs: vec![],
        }
    }

    fn parse(v: serde_json::Value) -> AttributeFilter {
        serde_json::from_value(v).expect("filter")
    }

    #[test]
    fn evaluates_comparisons_and_combinators() {
        let d = doc();
        let hr = json!({"equalsTo": {"name": "_category", "value": {"stringValue": "HR"}}});
        let it = json!({"equalsTo": {"name": "_category", "value": {"stringValue": "IT"}}});
        assert!(matches(&parse(hr.clone()), &d));
        assert!(!matches(&parse(it.clone()), &d));
        assert!(matches(&parse(json!({"orAllFilters": [it, hr]})), &d));
        assert!(!matches(
            &parse(json!({"notFilter": {"containsAny": {"name": "_category",
                "value": {"stringListValue": ["HR", "IT"]}}}})),
            &d
        ));
        assert!(matches(
            &parse(json!({"greaterThan": {"name": "_last_updated_at",
                "value": {"dateValue": 1_700_000_000}}})),
            &d
        ));
        assert!(!matches(
            &parse(json!({"equalsTo": {"name": "unknown", "value": {"stringValue": "x"}}})),
            &d
        ));
    }

    #[test]
    fn validation_names_the_path() {
        let f = parse(json!({"andAllFilters": [
            {"equalsTo": {"name": "_category", "value": {}}},
            {}
        ]}));
        let mut errors = Vec::new();
        validate(&f, "attributeFilter", 0, &mut errors);
        let names: Vec<&str> = errors.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(
            names,
            vec![
                "attributeFilter.andAllFilters[0].equalsTo.value",
                "attributeFilter.andAllFilters[1]"
            ]
        );
    }
}
