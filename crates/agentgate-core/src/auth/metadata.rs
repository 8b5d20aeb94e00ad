//! OAuth 2.0 Protected Resource Metadata (RFC 9728), which the MCP
//! authorization spec has clients fetch to find the authorization server:
//! served at `/.well-known/oauth-protected-resource` and at the
//! path-suffixed form for the resource (`…/oauth-protected-resource/mcp`),
//! and named by every 401's `WWW-Authenticate: Bearer resource_metadata=…`.

use serde::Serialize;

/// The metadata document.
#[derive(Debug, Clone, Serialize)]
pub struct ProtectedResourceMetadata {
    pub resource: String,
    pub authorization_servers: Vec<String>,
    pub bearer_methods_supported: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub scopes_supported: Vec<String>,
    pub resource_name: String,
}

impl ProtectedResourceMetadata {
    pub fn new(resource: &str, issuer: &str, scopes: &[String]) -> Self {
        Self {
            resource: resource.to_owned(),
            authorization_servers: vec![issuer.to_owned()],
            // Tokens in query strings end up in logs; only the header is read.
            bearer_methods_supported: vec!["header".into()],
            scopes_supported: scopes.to_vec(),
            resource_name: "agentgate".into(),
        }
    }
}

/// The metadata URL for `resource` (RFC 9728 §3.1: the well-known segment
/// goes between the host and the resource's path).
pub fn metadata_url(resource: &str) -> String {
    match url::Url::parse(resource) {
        Ok(url) => {
            let path = url.path().trim_end_matches('/');
            format!(
                "{}/.well-known/oauth-protected-resource{path}",
                url.origin().ascii_serialization()
            )
        }
        Err(_) => format!(
            "{}/.well-known/oauth-protected-resource",
            resource.trim_end_matches('/')
        ),
    }
}

/// The routes serving `metadata` (both the bare and the `/mcp`-suffixed
/// well-known path, whatever the configured resource's path is, since a
/// proxy may map paths).
pub fn router(metadata: ProtectedResourceMetadata) -> axum::Router {
    let document = axum::Json(metadata);
    let get = axum::routing::get(move || {
        let document = document.clone();
        async move {
            (
                // Public metadata: any site may read it (browser-based clients).
                [(http::header::ACCESS_CONTROL_ALLOW_ORIGIN, "*")],
                document,
            )
        }
    });
    axum::Router::new()
        .route("/.well-known/oauth-protected-resource", get.clone())
        .route("/.well-known/oauth-protected-resource/mcp", get)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_url_inserts_the_well_known_segment() {
        assert_eq!(
            metadata_url("https://mcp.example.com/mcp"),
            "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
        );
        assert_eq!(
            metadata_url("http://127.0.0.1:8722/"),
            "http://127.0.0.1:8722/.well-known/oauth-protected-resource"
        );
    }
}
