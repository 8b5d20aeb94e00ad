//! The GraphQL endpoint (`POST /graphql`, `POST /api/graphql`): reads
//! `{"query","variables","operationName"}`, counts the operation, passes the
//! `GraphQL-Features` header to the resolvers, executes, and rewrites errors into
//! GitHub's shape (`type` at the top level, `data` always present).

use async_graphql::Variables;
use async_graphql::parser::types::{OperationType, Selection};
use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::GithubSim;
use super::schema::Features;
use super::wire::RestError;

/// The `GraphQL-Features` flags (all headers, comma-separated, trimmed).
fn features(headers: &HeaderMap) -> Vec<String> {
    headers
        .get_all("graphql-features")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|f| f.trim().to_owned())
        .filter(|f| !f.is_empty())
        .collect()
}

/// Counts the request: its kind and its top-level `repository` fields.
fn count(sim: &GithubSim, query: &str, operation_name: Option<&str>) {
    let mut st = sim.state();
    st.stats.graphql_requests += 1;
    let Ok(doc) = async_graphql::parser::parse_query(query) else {
        return;
    };
    let op = doc
        .operations
        .iter()
        .find(|(name, _)| match operation_name {
            Some(wanted) => name.is_some_and(|n| n.as_str() == wanted),
            None => true,
        });
    let Some((_, op)) = op else {
        return;
    };
    match op.node.ty {
        OperationType::Mutation => st.stats.graphql_mutations += 1,
        _ => st.stats.graphql_queries += 1,
    }
    let targets = op
        .node
        .selection_set
        .node
        .items
        .iter()
        .filter(|s| match &s.node {
            Selection::Field(f) => f.node.name.node.as_str() == "repository",
            _ => false,
        })
        .count();
    st.stats.max_graphql_targets = st.stats.max_graphql_targets.max(targets);
}

/// async-graphql answers `null` for an object none of whose selected fields apply (an
/// inline fragment on another type); GitHub answers `{}`. Restores `{}` where the
/// emulator never produces a real `null`: list entries under `nodes`, and
/// `source`/`target`/`assignable`.
fn restore_empty_objects(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (key, v) in map.iter_mut() {
                match (key.as_str(), &mut *v) {
                    ("nodes", Value::Array(items)) => {
                        for item in items.iter_mut() {
                            if item.is_null() {
                                *item = json!({});
                            }
                        }
                    }
                    ("source" | "target" | "assignable", inner) if inner.is_null() => {
                        *inner = json!({});
                    }
                    _ => {}
                }
                restore_empty_objects(v);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(restore_empty_objects),
        _ => {}
    }
}

/// Moves `extensions.type` to `type` in every error, drops emptied `extensions`, and
/// restores GitHub's empty objects in `data`.
fn githubify(mut body: Value) -> Value {
    if let Some(data) = body.get_mut("data") {
        restore_empty_objects(data);
    }
    if let Some(errors) = body.get_mut("errors").and_then(Value::as_array_mut) {
        for error in errors {
            let Some(obj) = error.as_object_mut() else {
                continue;
            };
            let kind = obj
                .get_mut("extensions")
                .and_then(Value::as_object_mut)
                .and_then(|ext| ext.remove("type"));
            if obj
                .get("extensions")
                .and_then(Value::as_object)
                .is_some_and(serde_json::Map::is_empty)
            {
                obj.remove("extensions");
            }
            if let Some(kind) = kind {
                obj.insert("type".into(), kind);
            }
        }
    }
    if let Some(obj) = body.as_object_mut() {
        obj.entry("data").or_insert(Value::Null);
    }
    body
}

pub(crate) async fn handler(
    State(sim): State<GithubSim>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Ok(parsed) = serde_json::from_slice::<Value>(&body) else {
        return RestError::problems_parsing_json().into_response();
    };
    let Some(query) = parsed.get("query").and_then(Value::as_str) else {
        sim.state().stats.graphql_requests += 1;
        return Json(json!({
            "errors": [{ "message": "A query attribute must be specified and must be a string." }]
        }))
        .into_response();
    };
    let operation_name = parsed
        .get("operationName")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty());
    count(&sim, query, operation_name);
    let variables = match parsed.get("variables") {
        None | Some(Value::Null) => Variables::default(),
        Some(v @ Value::Object(_)) => Variables::from_json(v.clone()),
        Some(_) => {
            return Json(json!({
                "data": null,
                "errors": [{ "message": "Variables are invalid JSON." }]
            }))
            .into_response();
        }
    };
    let mut request = async_graphql::Request::new(query)
        .variables(variables)
        .data(sim.clone())
        .data(Features(features(&headers)));
    if let Some(name) = operation_name {
        request = request.operation_name(name);
    }
    let response = sim.inner.schema.execute(request).await;
    let value = serde_json::to_value(&response).unwrap_or_else(
        |e| json!({ "data": null, "errors": [{ "message": format!("internal error: {e}") }] }),
    );
    Json(githubify(value)).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_types_move_to_the_top_level() {
        let v = githubify(json!({
            "data": { "repository": null },
            "errors": [
                { "message": "m", "path": ["repository"], "extensions": { "type": "NOT_FOUND" } },
                { "message": "v", "extensions": { "code": "x" } }
            ]
        }));
        assert_eq!(v["errors"][0]["type"], "NOT_FOUND");
        assert!(v["errors"][0].get("extensions").is_none());
        assert_eq!(v["errors"][1]["extensions"]["code"], "x");
        assert_eq!(githubify(json!({"errors": []}))["data"], Value::Null);
        let v = githubify(
            json!({"data": {"a": {"nodes": [null, {"x": 1}], "source": null, "author": null}}}),
        );
        assert_eq!(v["data"]["a"]["nodes"], json!([{}, {"x": 1}]));
        assert_eq!(v["data"]["a"]["source"], json!({}));
        assert_eq!(v["data"]["a"]["author"], Value::Null);
    }

    #[test]
    fn features_are_split_and_trimmed() {
        let mut h = HeaderMap::new();
        h.insert(
            "GraphQL-Features",
            axum::http::HeaderValue::from_static(" a , b,,c"),
        );
        assert_eq!(features(&h), vec!["a", "b", "c"]);
    }
}
