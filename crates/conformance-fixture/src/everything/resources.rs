//! `resources/list`, the resource template, `resources/read` and
//! `completion/complete`.

use super::*;

impl Everything {
    /// `resources/list`.
    pub(crate) async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        Ok(ListResourcesResult::with_all_items(vec![
            Resource::new("test://static-text", "static-text")
                .with_title("Static Text Resource")
                .with_description("A static text resource for testing")
                .with_mime_type("text/plain"),
            Resource::new("test://static-binary", "static-binary")
                .with_title("Static Binary Resource")
                .with_description("A static binary resource (PNG image) for testing")
                .with_mime_type("image/png"),
        ])
        .with_ttl_ms(CACHE_TTL_MS)
        .with_cache_scope(rmcp::model::CacheScope::Public))
    }

    /// `resources/templates/list`.
    pub(crate) async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(ListResourceTemplatesResult::with_all_items(vec![
            ResourceTemplate::new(TEMPLATE_URI, "template")
                .with_title("Resource Template")
                .with_description("A resource template with parameter substitution")
                .with_mime_type("application/json"),
        ])
        .with_ttl_ms(CACHE_TTL_MS)
        .with_cache_scope(rmcp::model::CacheScope::Public))
    }

    /// `resources/read`. Unknown URIs fail with `resource_not_found` (which
    /// rmcp reports as `-32602` to 2026-07-28 peers) carrying `data.uri`.
    pub(crate) async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let uri = request.uri.as_str();
        let contents = match uri {
            "test://static-text" => {
                ResourceContents::text("This is the content of the static text resource.", uri)
                    .with_mime_type("text/plain")
            }
            "test://static-binary" => {
                ResourceContents::blob(PNG_BASE64, uri).with_mime_type("image/png")
            }
            _ => match template_id(uri) {
                Some(id) => ResourceContents::text(
                    json!({ "id": id, "templateTest": true, "data": format!("Data for ID: {id}") })
                        .to_string(),
                    uri,
                )
                .with_mime_type("application/json"),
                None => {
                    return Err(ErrorData::resource_not_found(
                        format!("resource not found: {uri}"),
                        Some(json!({ "uri": uri })),
                    ));
                }
            },
        };
        Ok(ReadResourceResult::new(vec![contents])
            .with_ttl_ms(CACHE_TTL_MS)
            .with_cache_scope(rmcp::model::CacheScope::Public)
            .into())
    }

    /// `completion/complete`: prefix-filtered suggestions for the prompt
    /// arguments and the template's `{id}`.
    pub(crate) async fn complete(
        &self,
        request: CompleteRequestParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        let candidates: &[&str] = match &request.r#ref {
            Reference::Prompt(prompt) => {
                match (prompt.name.as_str(), request.argument.name.as_str()) {
                    ("test_prompt_with_arguments", "arg1") => {
                        &["paris", "park", "party", "test-value"]
                    }
                    ("test_prompt_with_arguments", "arg2") => &["world", "wonder", "test-value"],
                    ("test_prompt_with_embedded_resource", "resourceUri") => {
                        &["test://static-text", "test://static-binary"]
                    }
                    ("test_prompt_with_arguments" | "test_prompt_with_embedded_resource", _) => &[],
                    (other, _) => {
                        return Err(ErrorData::invalid_params(
                            format!("unknown prompt `{other}` (field `ref.name`)"),
                            None,
                        ));
                    }
                }
            }
            Reference::Resource(template) => {
                if template.uri != TEMPLATE_URI {
                    return Err(ErrorData::invalid_params(
                        format!(
                            "unknown resource template `{}` (field `ref.uri`)",
                            template.uri
                        ),
                        None,
                    ));
                }
                if request.argument.name == "id" {
                    &["1", "2", "3", "123"]
                } else {
                    &[]
                }
            }
            _ => {
                return Err(ErrorData::invalid_params(
                    "unsupported completion reference type (field `ref.type`)",
                    None,
                ));
            }
        };
        let prefix = request.argument.value.as_str();
        let values: Vec<String> = candidates
            .iter()
            .filter(|value| value.starts_with(prefix))
            .map(|value| (*value).to_owned())
            .collect();
        let info = CompletionInfo::with_all_values(values)
            .map_err(|error| ErrorData::internal_error(error, None))?;
        Ok(CompleteResult::new(info))
    }
}

/// `{id}` of `test://template/{id}/data`, if `uri` matches the template.
pub(super) fn template_id(uri: &str) -> Option<&str> {
    let id = uri
        .strip_prefix("test://template/")?
        .strip_suffix("/data")?;
    (!id.is_empty() && !id.contains('/')).then_some(id)
}
