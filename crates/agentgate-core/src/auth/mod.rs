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
//! # cannot know it). Required in OAuth mode, which uses it as the token
//! # audience and in the protected-resource metadata: a default would let two
//! # deployments on one issuer accept each other's tokens.
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
//! require_at_jwt_typ = true                  # RFC 9068 `typ: at+jwt` (the default)
//! required_scopes = ["mcp"]                  # every request needs these
//! [auth.oauth.method_scopes]                 # JSON-RPC method → scopes
//! "tasks/cancel" = ["mcp:write"]
//! [auth.oauth.tool_scopes]                   # tools/call of a tool → scopes
//! QBusinessQueryTool = ["qbusiness"]
//! ```
//!
//! - [`tokens`]: static tokens, stored as hashes, compared in constant time.
//! - [`jwt`]: JWT validation against the issuer's JWKS.
//! - [`metadata`]: RFC 9728 protected-resource metadata.
//! - [`scopes`]: which scopes a request needs; 403 `insufficient_scope`.
//! - `expiry`: an event stream ends when its token expires.
//! - [`client`]: the client's address, through trusted proxies.
//! - `failures`: bad tokens are logged and throttled per client address.
//!
//! A request without a usable `Authorization: Bearer` header gets 401 with
//! `WWW-Authenticate: Bearer` (naming the metadata URL in OAuth mode, and
//! `error="invalid_token"` when a token was presented). In OAuth mode a
//! token lacking a configured scope gets 403 `insufficient_scope` instead,
//! and an event stream ends when its token expires. Tokens are never
//! logged; rejections are logged with their reason at debug level.

pub mod client;
mod expiry;
mod failures;
pub mod jwt;
pub mod metadata;
pub mod scopes;
pub mod tokens;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use agentgate_backend::Owner;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse as _, Response};
use serde::Deserialize;

/// An authenticated HTTP principal, placed in the request's extensions by
/// [`Authenticator`]'s layer. Without one, HTTP callers are
/// [`Owner::anonymous`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// Who owns the tasks the request creates and may see.
    pub owner: Owner,
    /// The scopes the credential grants (an OAuth token's `scope` or
    /// `scp`); empty for static tokens, which are not scoped.
    pub scopes: Vec<String>,
    /// When the credential expires (an OAuth token's `exp`); `None` for
    /// static tokens.
    pub expires_at: Option<SystemTime>,
    /// The OAuth access token itself, for backends that exchange it for the
    /// principal's own upstream identity
    /// ([`Backend::principal_request`](agentgate_backend::Backend::principal_request));
    /// `None` for static tokens. Redacted in `Debug`.
    pub token: Option<agentgate_backend::AccessToken>,
}

impl Principal {
    /// A principal with no scopes and no expiry (a static token, a test).
    pub fn new(owner: Owner) -> Self {
        Self {
            owner,
            scopes: Vec::new(),
            expires_at: None,
            token: None,
        }
    }
}

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
    /// RFC 9068 §4: refuse a token whose header `typ` is not `at+jwt` (or
    /// `application/at+jwt`), such as an ID token (`typ: JWT`) the same
    /// issuer signed for the same audience. Turn off only for an issuer
    /// that does not type its access tokens.
    #[serde(default = "default_true")]
    pub require_at_jwt_typ: bool,
    /// Scopes every request needs ([`scopes`]).
    #[serde(default)]
    pub required_scopes: Vec<String>,
    /// JSON-RPC method → the scopes it needs besides `required_scopes`.
    #[serde(default)]
    pub method_scopes: BTreeMap<String, Vec<String>>,
    /// Tool name → the scopes `tools/call` of it needs.
    #[serde(default)]
    pub tool_scopes: BTreeMap<String, Vec<String>>,
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
            require_at_jwt_typ: true,
            required_scopes: Vec::new(),
            method_scopes: BTreeMap::new(),
            tool_scopes: BTreeMap::new(),
        }
    }
}

fn default_true() -> bool {
    true
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
    /// OAuth mode: the scopes requests need (empty otherwise).
    scopes: scopes::ScopePolicy,
    /// How long past its `exp` a token is still accepted (clock skew), so
    /// how long past it a stream it opened may run.
    leeway: Duration,
}

#[derive(Debug)]
enum Check {
    Tokens(tokens::TokenTable),
    OAuth(Box<jwt::JwtVerifier>),
}

impl Authenticator {
    /// The authenticator `config` asks for, `None` for `mode = "none"`.
    /// `default_resource` is the URL of `/mcp` when `resource` is not set
    /// (not in OAuth mode, which needs it set); `env` reads `token_env`
    /// variables.
    pub fn from_config(
        config: &AuthConfig,
        default_resource: &str,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<Arc<Self>>, AuthError> {
        if config.mode == AuthMode::Oauth && config.resource.is_none() {
            // The resource is the audience tokens must name. Guessing it from
            // the listen address would make every instance behind a proxy
            // `http://127.0.0.1:8722/mcp`: two deployments on one issuer
            // would accept each other's tokens.
            return Err(AuthError::Config(
                "auth.mode = \"oauth\" needs auth.resource, the public URL clients reach /mcp \
                 at, which tokens must name as their audience, e.g. \
                 resource = \"https://mcp.example.com/mcp\" under [auth]"
                    .into(),
            ));
        }
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
                    scopes: scopes::ScopePolicy::default(),
                    leeway: Duration::ZERO,
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
                let scopes = scopes::ScopePolicy::new(
                    &oauth.required_scopes,
                    &oauth.method_scopes,
                    &oauth.tool_scopes,
                )?;
                let document = metadata::ProtectedResourceMetadata::new(
                    &resource,
                    verifier.issuer(),
                    &oauth.scopes_supported,
                );
                Ok(Some(Arc::new(Self {
                    check: Check::OAuth(Box::new(verifier)),
                    failures: failures::Failures::default(),
                    metadata: Some((document, metadata::metadata_url(&resource))),
                    scopes,
                    leeway: Duration::from_secs(oauth.leeway_seconds),
                })))
            }
        }
    }

    /// The caller's principal, from the `Authorization` header.
    pub async fn authenticate(&self, headers: &HeaderMap) -> Result<Principal, Rejection> {
        let token = bearer(headers)?;
        match &self.check {
            Check::Tokens(table) => table
                .verify(token)
                .map(Principal::new)
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
            // MCP 2025-11-25: the scopes to ask for, so a client need not
            // guess: what every request needs when that is configured (the
            // least a client must hold to get in), else everything offered.
            let scopes = match self.scopes.required() {
                [] => &document.scopes_supported[..],
                required => required,
            };
            if !scopes.is_empty() {
                challenge.push_str(&format!(", scope=\"{}\"", scopes.join(" ")));
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
        // The forwarded client when the accept loop resolved one, else the
        // TCP peer (a router served some other way, a test).
        let peer = request
            .extensions()
            .get::<client::ClientAddr>()
            .map(|client| client.0)
            .or_else(|| {
                request
                    .extensions()
                    .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
                    .map(|info| info.0.ip())
            });
        match self.authenticate(request.headers()).await {
            Ok(principal) => {
                tracing::trace!(
                    principal = %principal.owner, path = %request.uri().path(), "authenticated"
                );
                // The scopes every request needs are checked here, before the
                // body is read; a method's or a tool's in `authorize_calls`.
                let required = self.scopes.required().iter().map(String::as_str);
                if !scopes::covers(&principal.scopes, required) {
                    let needed: Vec<&str> =
                        self.scopes.required().iter().map(String::as_str).collect();
                    return self.insufficient_scope(&principal, &needed);
                }
                let expires_at = principal.expires_at;
                request.extensions_mut().insert(principal);
                let response = next.run(request).await;
                match expires_at {
                    Some(at) => expiry::end_streams_at(response, at, self.leeway),
                    None => response,
                }
            }
            Err(rejection) => {
                match &rejection {
                    Rejection::Missing => {
                        // Clients try without a token first to find the
                        // metadata: not a failure, and never throttled.
                        tracing::debug!(path = %request.uri().path(), "refused: no bearer token");
                    }
                    Rejection::Invalid(reason) => {
                        // Checked after the token, so only the failing wait.
                        let now = std::time::Instant::now();
                        if let Some(wait) = self.failures.throttled(peer, now) {
                            return too_many_failures(wait);
                        }
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

impl Authenticator {
    /// True when a method or a tool has scopes of its own, so the body's
    /// calls must be passed to [`authorize_calls`](Self::authorize_calls).
    pub fn has_call_scopes(&self) -> bool {
        self.scopes.has_call_rules()
    }

    /// `None` when the request's principal (from its extensions) holds
    /// every scope `calls` need; otherwise the 403 `insufficient_scope`
    /// answer naming them. A request without a principal passed no
    /// [`protect`](Self::protect) layer and is not this check's to refuse.
    pub fn authorize_calls(
        &self,
        extensions: &http::Extensions,
        calls: &[scopes::Call<'_>],
    ) -> Option<Response> {
        let principal = extensions.get::<Principal>()?;
        let needed = self.scopes.needed(calls);
        if scopes::covers(&principal.scopes, needed.iter().copied()) {
            return None;
        }
        let needed: Vec<&str> = needed.into_iter().collect();
        Some(self.insufficient_scope(principal, &needed))
    }

    /// 403 with the RFC 6750 `insufficient_scope` challenge: `scope` names
    /// every scope the request needs (not only the missing ones, and not
    /// the granted ones: MCP has the client add them to what it holds).
    fn insufficient_scope(&self, principal: &Principal, needed: &[&str]) -> Response {
        let scope = needed.join(" ");
        let missing: Vec<&str> = needed
            .iter()
            .copied()
            .filter(|s| !principal.scopes.iter().any(|g| g == s))
            .collect();
        tracing::debug!(
            principal = %principal.owner, needed = %scope, missing = %missing.join(" "),
            "refused: insufficient scope"
        );
        let mut challenge = format!("Bearer error=\"insufficient_scope\", scope=\"{scope}\"");
        if let Some((_, url)) = &self.metadata {
            challenge.push_str(&format!(", resource_metadata=\"{url}\""));
        }
        challenge
            .push_str(", error_description=\"the access token lacks a scope this request needs\"");
        let mut response = (
            StatusCode::FORBIDDEN,
            axum::Json(serde_json::json!({
                "error": "insufficient_scope",
                "error_description": format!("this request needs the scopes: {scope}"),
                "scope": scope,
            })),
        )
            .into_response();
        // Scopes are checked tokens and the URL a parsed one, so the value
        // is a valid header; if not, the 403 still says what is missing.
        if let Ok(value) = HeaderValue::from_str(&challenge) {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, value);
        }
        response
    }
}

/// The answer to a bad token from an address that failed too often.
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
            resource: Some("https://mcp.example.com/mcp".into()),
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

    #[test]
    fn oauth_without_a_resource_is_refused_with_an_example() {
        let config = AuthConfig {
            mode: AuthMode::Oauth,
            oauth: Some(OAuthConfig {
                issuer: "https://auth.example.com".into(),
                ..OAuthConfig::default()
            }),
            ..AuthConfig::default()
        };
        let err = Authenticator::from_config(&config, "http://127.0.0.1:1/mcp", |_| None)
            .expect_err("no resource");
        let err = err.to_string();
        assert!(
            err.contains("auth.resource") && err.contains("https://mcp.example.com/mcp"),
            "{err}"
        );
    }
}
