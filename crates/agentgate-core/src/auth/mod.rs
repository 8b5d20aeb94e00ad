//! Authentication for the HTTP transport: who is calling `/mcp`, as a
//! [`Principal`] in the request's extensions, which
//! [`Gateway::owner`](crate::mcp::Gateway::owner) turns into the owner of
//! the tasks the request creates and may see.
//!
//! The `[auth]` section of the config file:
//!
//! ```toml
//! [auth]
//! mode = "tokens"            # "none" (default), "tokens" or "oauth"
//! # The public URL of /mcp, as clients reach it (behind a proxy the server
//! # cannot know it). Default: http://<listen address>/mcp. OAuth mode uses it
//! # as the token audience and in the protected-resource metadata.
//! resource = "https://mcp.example.com/mcp"
//!
//! # mode = "tokens": static bearer tokens; principal "token:<principal>".
//! [[auth.tokens]]
//! principal = "alice"
//! sha256 = "<hex SHA-256 of the token>"   # `agentgate auth new-token --principal alice`
//! [[auth.tokens]]
//! principal = "ci"
//! token_env = "AGENTGATE_CI_TOKEN"        # or: the token itself, from the environment
//!
//! # mode = "oauth": JWT access tokens of one authorization server;
//! # principal "oauth:<iss>#<sub>".
//! [auth.oauth]
//! issuer = "https://auth.example.com"
//! audience = "https://mcp.example.com/mcp"  # default: `resource`
//! jwks_uri = "https://auth.example.com/jwks" # default: discovered from the issuer
//! algorithms = ["RS256", "ES256"]            # the default
//! scopes_supported = ["mcp"]                 # advertised in the metadata
//! leeway_seconds = 60                        # clock skew allowed on exp/nbf
//! jwks_min_refresh_seconds = 30              # unknown-kid refetch rate limit
//! ```
//!
//! - [`tokens`]: static tokens, stored as hashes, compared in constant time.
//! - [`jwt`]: JWT validation against the issuer's JWKS.
//! - [`metadata`]: RFC 9728 protected-resource metadata.
//!
//! A request without a usable `Authorization: Bearer` header gets 401 with
//! `WWW-Authenticate: Bearer` (naming the metadata URL in OAuth mode, and
//! `error="invalid_token"` when a token was presented). Tokens are never
//! logged; rejections are logged with their reason at debug level.

mod failures;
pub mod jwt;
pub mod metadata;
pub mod tokens;

use std::sync::Arc;
use std::time::Duration;

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse as _, Response};
use serde::Deserialize;

use crate::task::Owner;

/// An authenticated HTTP principal, placed in the request's extensions by
/// [`Authenticator`]'s layer. Without one, HTTP callers are
/// [`Owner::anonymous`].
#[derive(Debug, Clone)]
pub struct Principal(pub Owner);

/// Bad `[auth]` settings.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AuthError {
    #[error("{0}")]
    Config(String),
}

/// Why a request is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rejection {
    /// No bearer token.
    Missing,
    /// A token that does not check out; the reason is for the log only.
    Invalid(String),
    /// The token cannot be checked now (the issuer's keys are unreachable).
    Unavailable(String),
}

/// `[auth]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthConfig {
    #[serde(default)]
    pub mode: AuthMode,
    /// The public URL of `/mcp`.
    pub resource: Option<String>,
    #[serde(default)]
    pub tokens: Vec<TokenEntry>,
    pub oauth: Option<OAuthConfig>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AuthMode {
    /// Every HTTP caller is `anonymous`.
    #[default]
    None,
    Tokens,
    Oauth,
}

/// `[[auth.tokens]]`: one principal's token, by hash or from the environment.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenEntry {
    pub principal: String,
    pub sha256: Option<String>,
    pub token_env: Option<String>,
}

/// `[auth.oauth]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OAuthConfig {
    pub issuer: String,
    pub audience: Option<String>,
    pub jwks_uri: Option<String>,
    #[serde(default = "default_algorithms")]
    pub algorithms: Vec<String>,
    #[serde(default)]
    pub scopes_supported: Vec<String>,
    #[serde(default = "default_leeway")]
    pub leeway_seconds: u64,
    #[serde(default = "default_min_refresh")]
    pub jwks_min_refresh_seconds: u64,
}

impl Default for OAuthConfig {
    fn default() -> Self {
        Self {
            issuer: String::new(),
            audience: None,
            jwks_uri: None,
            algorithms: default_algorithms(),
            scopes_supported: Vec::new(),
            leeway_seconds: default_leeway(),
            jwks_min_refresh_seconds: default_min_refresh(),
        }
    }
}

fn default_algorithms() -> Vec<String> {
    vec!["RS256".into(), "ES256".into()]
}
fn default_leeway() -> u64 {
    60
}
fn default_min_refresh() -> u64 {
    30
}

/// The configured way of telling callers apart.
#[derive(Debug)]
pub struct Authenticator {
    check: Check,
    /// Failed attempts per client address (logged, throttled).
    failures: failures::Failures,
    /// OAuth mode: the RFC 9728 document and where it is served.
    metadata: Option<(metadata::ProtectedResourceMetadata, String)>,
}

#[derive(Debug)]
enum Check {
    Tokens(tokens::TokenTable),
    OAuth(Box<jwt::JwtVerifier>),
}

impl Authenticator {
    /// The authenticator `config` asks for, `None` for `mode = "none"`.
    /// `default_resource` is the URL of `/mcp` when `resource` is not set;
    /// `env` reads `token_env` variables.
    pub fn from_config(
        config: &AuthConfig,
        default_resource: &str,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<Arc<Self>>, AuthError> {
        let resource = config
            .resource
            .clone()
            .unwrap_or_else(|| default_resource.to_owned());
        if url::Url::parse(&resource).is_err() {
            return Err(AuthError::Config(format!(
                "auth.resource must be the absolute public URL of /mcp, e.g. \
                 \"https://mcp.example.com/mcp\", got {resource:?}"
            )));
        }
        let unused = |what: &str| {
            AuthError::Config(format!(
                "{what} is set but auth.mode is {:?}; set auth.mode to use it or remove it",
                format!("{:?}", config.mode).to_lowercase()
            ))
        };
        match config.mode {
            AuthMode::None => {
                if !config.tokens.is_empty() {
                    return Err(unused("[[auth.tokens]]"));
                }
                if config.oauth.is_some() {
                    return Err(unused("[auth.oauth]"));
                }
                Ok(None)
            }
            AuthMode::Tokens => {
                if config.oauth.is_some() {
                    return Err(unused("[auth.oauth]"));
                }
                Ok(Some(Arc::new(Self {
                    check: Check::Tokens(tokens::TokenTable::new(&config.tokens, env)?),
                    failures: failures::Failures::default(),
                    metadata: None,
                })))
            }
            AuthMode::Oauth => {
                if !config.tokens.is_empty() {
                    return Err(unused("[[auth.tokens]]"));
                }
                let Some(oauth) = &config.oauth else {
                    return Err(AuthError::Config(
                        "auth.mode = \"oauth\" needs an [auth.oauth] section with at least \
                         `issuer = \"https://…\"`"
                            .into(),
                    ));
                };
                let verifier = jwt::JwtVerifier::new(oauth, &resource)?;
                let document = metadata::ProtectedResourceMetadata::new(
                    &resource,
                    verifier.issuer(),
                    &oauth.scopes_supported,
                );
                Ok(Some(Arc::new(Self {
                    check: Check::OAuth(Box::new(verifier)),
                    failures: failures::Failures::default(),
                    metadata: Some((document, metadata::metadata_url(&resource))),
                })))
            }
        }
    }

    /// The caller's principal, from the `Authorization` header.
    pub async fn authenticate(&self, headers: &HeaderMap) -> Result<Owner, Rejection> {
        let token = bearer(headers)?;
        match &self.check {
            Check::Tokens(table) => table
                .verify(token)
                .ok_or_else(|| Rejection::Invalid("no configured token matches".into())),
            Check::OAuth(verifier) => verifier.verify(token).await,
        }
    }

    /// The well-known metadata routes (OAuth mode only).
    pub fn metadata_router(&self) -> Option<axum::Router> {
        self.metadata
            .as_ref()
            .map(|(document, _)| metadata::router(document.clone()))
    }

    /// The 401/503 answer for `rejection`.
    pub fn reject(&self, rejection: &Rejection) -> Response {
        let mut challenge = String::from("Bearer realm=\"agentgate\"");
        if let Some((document, url)) = &self.metadata {
            challenge.push_str(&format!(", resource_metadata=\"{url}\""));
            // MCP 2025-11-25: the scopes to ask for, so a client need not guess.
            if !document.scopes_supported.is_empty() {
                challenge.push_str(&format!(
                    ", scope=\"{}\"",
                    document.scopes_supported.join(" ")
                ));
            }
        }
        let (status, body) = match rejection {
            Rejection::Missing => (
                StatusCode::UNAUTHORIZED,
                serde_json::json!({
                    "error": "unauthorized",
                    "error_description": "send Authorization: Bearer <token>"
                }),
            ),
            // The reason stays in the log: it would help someone probing tokens.
            Rejection::Invalid(_) => {
                challenge.push_str(
                    ", error=\"invalid_token\", \
                     error_description=\"the access token is invalid or expired\"",
                );
                (
                    StatusCode::UNAUTHORIZED,
                    serde_json::json!({
                        "error": "invalid_token",
                        "error_description": "the access token is invalid or expired"
                    }),
                )
            }
            Rejection::Unavailable(_) => (
                StatusCode::SERVICE_UNAVAILABLE,
                serde_json::json!({
                    "error": "temporarily_unavailable",
                    "error_description": "the token issuer's keys are unreachable; try again"
                }),
            ),
        };
        let mut response = (status, axum::Json(body)).into_response();
        if status == StatusCode::UNAUTHORIZED
            && let Ok(value) = HeaderValue::from_str(&challenge)
        {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, value);
        }
        response
    }

    /// Wraps `router` (its routes so far and its fallback) so that it needs
    /// a principal: the caller's [`Principal`] goes into the request's
    /// extensions, or the request is answered 401.
    pub fn protect(self: &Arc<Self>, router: axum::Router) -> axum::Router {
        let auth = Arc::clone(self);
        router.layer(axum::middleware::from_fn(
            move |request: axum::extract::Request, next: axum::middleware::Next| {
                let auth = Arc::clone(&auth);
                async move { auth.guard(request, next).await }
            },
        ))
    }

    /// As [`protect`](Self::protect), for the routes only: a router merged
    /// into a bigger one must not put its fallback (every unknown path)
    /// behind the gate.
    pub fn protect_routes(self: &Arc<Self>, router: axum::Router) -> axum::Router {
        let auth = Arc::clone(self);
        router.route_layer(axum::middleware::from_fn(
            move |request: axum::extract::Request, next: axum::middleware::Next| {
                let auth = Arc::clone(&auth);
                async move { auth.guard(request, next).await }
            },
        ))
    }

    async fn guard(
        &self,
        mut request: axum::extract::Request,
        next: axum::middleware::Next,
    ) -> Response {
        let peer = request
            .extensions()
            .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
            .map(|info| info.0.ip());
        let now = std::time::Instant::now();
        if let Some(wait) = self.failures.throttled(peer, now) {
            return too_many_failures(wait);
        }
        match self.authenticate(request.headers()).await {
            Ok(owner) => {
                tracing::trace!(principal = %owner, path = %request.uri().path(), "authenticated");
                request.extensions_mut().insert(Principal(owner));
                next.run(request).await
            }
            Err(rejection) => {
                match &rejection {
                    Rejection::Missing => {
                        // Clients try without a token first to find the
                        // metadata; that is not an attack, but it counts.
                        tracing::debug!(path = %request.uri().path(), "refused: no bearer token");
                        self.failures
                            .record(peer, request.uri().path(), "no bearer token", now);
                    }
                    Rejection::Invalid(reason) => {
                        self.failures
                            .record(peer, request.uri().path(), reason, now);
                    }
                    Rejection::Unavailable(reason) => {
                        tracing::warn!(path = %request.uri().path(), %reason, "cannot check bearer tokens");
                    }
                }
                self.reject(&rejection)
            }
        }
    }
}

/// The answer to an address that failed authentication too often.
fn too_many_failures(wait: Duration) -> Response {
    let secs = wait.as_secs().max(1);
    (
        StatusCode::TOO_MANY_REQUESTS,
        [(header::RETRY_AFTER, secs.to_string())],
        axum::Json(serde_json::json!({
            "error": "too_many_requests",
            "error_description": format!(
                "too many failed authentication attempts from this address; retry in {secs} s"
            )
        })),
    )
        .into_response()
}

/// The token of the one `Authorization: Bearer` header.
fn bearer(headers: &HeaderMap) -> Result<&str, Rejection> {
    let mut values = headers.get_all(header::AUTHORIZATION).iter();
    let Some(value) = values.next() else {
        return Err(Rejection::Missing);
    };
    if values.next().is_some() {
        return Err(Rejection::Invalid("several Authorization headers".into()));
    }
    let value = value
        .to_str()
        .map_err(|_| Rejection::Invalid("Authorization is not ASCII".into()))?;
    let (scheme, token) = value
        .split_once(' ')
        .ok_or_else(|| Rejection::Invalid("Authorization is not `Bearer <token>`".into()))?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(Rejection::Invalid(format!(
            "Authorization scheme {scheme:?} is not Bearer"
        )));
    }
    let token = token.trim();
    if token.is_empty() {
        return Err(Rejection::Invalid("empty bearer token".into()));
    }
    Ok(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_header_parsing() {
        let mut headers = HeaderMap::new();
        assert_eq!(bearer(&headers), Err(Rejection::Missing));
        headers.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("bearer abc"),
        );
        assert_eq!(bearer(&headers), Ok("abc"));
        headers.insert(header::AUTHORIZATION, HeaderValue::from_static("Basic abc"));
        assert!(matches!(bearer(&headers), Err(Rejection::Invalid(_))));
        headers.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer "));
        assert!(matches!(bearer(&headers), Err(Rejection::Invalid(_))));
    }

    #[test]
    fn unused_sections_and_bad_resources_are_refused() {
        let config = AuthConfig::default();
        assert!(
            Authenticator::from_config(&config, "http://127.0.0.1:1/mcp", |_| None)
                .expect("none is fine")
                .is_none()
        );
        let config = AuthConfig {
            mode: AuthMode::Oauth,
            ..AuthConfig::default()
        };
        let err = Authenticator::from_config(&config, "http://127.0.0.1:1/mcp", |_| None)
            .expect_err("oauth without [auth.oauth]");
        assert!(err.to_string().contains("[auth.oauth]"), "{err}");
        let config = AuthConfig {
            mode: AuthMode::Tokens,
            resource: Some("mcp.example.com".into()),
            ..AuthConfig::default()
        };
        let err = Authenticator::from_config(&config, "http://127.0.0.1:1/mcp", |_| None)
            .expect_err("relative resource");
        assert!(err.to_string().contains("auth.resource"), "{err}");
    }
}
