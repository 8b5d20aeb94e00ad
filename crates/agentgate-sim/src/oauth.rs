//! An OAuth 2.0 token endpoint for the client credentials grant (RFC 6749 §4.4), for the
//! emulators whose callers authenticate with its access tokens: an A2A agent whose card
//! asks for it (`securitySchemes.*.oauth2SecurityScheme.flows.clientCredentials.tokenUrl`,
//! §4.5.9 of the A2A specification) and the slow-tool MCP server. The RFC's rules the
//! endpoint follows are summarised, section by section, in `contracts/oauth2/README.md`.
//!
//! ```text
//! POST /oauth/token  (application/x-www-form-urlencoded: grant_type=client_credentials[&scope=…])
//!   client authentication: HTTP Basic (§2.3.1), or client_id/client_secret in the body
//!   ─▶ 200 {"access_token", "token_type": "Bearer", "expires_in", "scope"}  (§5.1, no-store)
//!   ─▶ 400/401 {"error": invalid_request | invalid_client | unsupported_grant_type | invalid_scope} (§5.2)
//! a request with `Authorization: Bearer <access_token>` ─▶ accepted until the token expires
//! ```
//!
//! Tokens are random, live `token_ttl`, and can all be revoked at once
//! ([`A2aSim::revoke_tokens`](crate::a2a::A2aSim::revoke_tokens)), so a test sees a client
//! fetch a new one when the emulator answers 401.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use serde_json::{Value, json};

/// The token endpoint's path.
pub const TOKEN_PATH: &str = "/oauth/token";

/// The security scheme name the card declares for the OAuth client.
pub const OAUTH_SCHEME: &str = "oauth";

/// The client the token endpoint knows. `Debug` redacts the secret.
#[derive(Clone, PartialEq, Eq)]
pub struct OAuthClient {
    pub client_id: String,
    pub client_secret: String,
    /// How long an issued access token is valid (`expires_in`).
    pub token_ttl: Duration,
}

impl std::fmt::Debug for OAuthClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuthClient")
            .field("client_id", &self.client_id)
            .field("client_secret", &"<redacted>")
            .field("token_ttl", &self.token_ttl)
            .finish()
    }
}

/// Issued access tokens and their expiry.
#[derive(Debug, Default)]
pub(crate) struct Tokens {
    issued: HashMap<String, Instant>,
}

impl Tokens {
    /// Whether `token` was issued and has not expired or been revoked.
    pub(crate) fn valid(&self, token: &str) -> bool {
        self.issued
            .get(token)
            .is_some_and(|until| Instant::now() < *until)
    }

    pub(crate) fn revoke_all(&mut self) {
        self.issued.clear();
    }

    fn issue(&mut self, ttl: Duration) -> String {
        self.issued.retain(|_, until| Instant::now() < *until);
        let token = format!("sim-at-{:032x}", rand::random::<u128>());
        self.issued.insert(token.clone(), Instant::now() + ttl);
        token
    }
}

/// An RFC 6749 §5.2 error answer.
fn error(status: StatusCode, code: &str, description: &str, basic: bool) -> Response {
    let mut response = (
        status,
        [
            (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
            (header::PRAGMA, HeaderValue::from_static("no-cache")),
        ],
        axum::Json(json!({ "error": code, "error_description": description })),
    )
        .into_response();
    // §5.2: a failed Basic authentication is answered 401 with the scheme's challenge.
    if basic && status == StatusCode::UNAUTHORIZED {
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Basic realm=\"agentgate-sim\""),
        );
    }
    response
}

/// `client_id:client_secret` from an HTTP Basic header, each form-urldecoded (§2.3.1).
fn basic_credentials(headers: &HeaderMap) -> Option<Result<(String, String), ()>> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, rest) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(rest.trim())
        .ok()
        .and_then(|bytes| String::from_utf8(bytes).ok());
    let Some((id, secret)) = decoded.as_deref().and_then(|d| d.split_once(':')) else {
        return Some(Err(()));
    };
    let unescape = |s: &str| -> String {
        form_urlencoded::parse(format!("x={s}").as_bytes())
            .next()
            .map(|(_, v)| v.into_owned())
            .unwrap_or_default()
    };
    Some(Ok((unescape(id), unescape(secret))))
}

/// Handles one token request for `scope`, the one scope the endpoint knows.
pub(crate) fn token_request(
    client: Option<&OAuthClient>,
    scope: &str,
    tokens: &mut Tokens,
    headers: &HeaderMap,
    body: &Bytes,
) -> (Response, bool) {
    let Some(client) = client else {
        return (
            (StatusCode::NOT_FOUND, "this emulator has no OAuth client\n").into_response(),
            false,
        );
    };
    let form_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(';')
                .next()
                .is_some_and(|t| t.trim() == "application/x-www-form-urlencoded")
        });
    if !form_type {
        return (
            error(
                StatusCode::BAD_REQUEST,
                "invalid_request",
                "the body must be application/x-www-form-urlencoded (RFC 6749 §4.4.2)",
                false,
            ),
            false,
        );
    }
    let mut params: HashMap<String, String> = HashMap::new();
    for (key, value) in form_urlencoded::parse(body) {
        // §3.2: a parameter without a value is as if omitted.
        if value.is_empty() {
            continue;
        }
        // §3.2: parameters MUST NOT be included more than once.
        if params.insert(key.to_string(), value.into_owned()).is_some() {
            return (
                error(
                    StatusCode::BAD_REQUEST,
                    "invalid_request",
                    &format!("parameter `{key}` is repeated"),
                    false,
                ),
                false,
            );
        }
    }
    let basic = basic_credentials(headers);
    let in_body = (params.get("client_id"), params.get("client_secret"));
    let (id, secret, used_basic) = match (basic, in_body) {
        (Some(Ok(_)), (Some(_), _) | (_, Some(_))) => {
            // §2.3: a client MUST NOT use more than one authentication method per request.
            return (
                error(
                    StatusCode::BAD_REQUEST,
                    "invalid_request",
                    "the client authenticated twice (Basic and the body); use one method",
                    false,
                ),
                false,
            );
        }
        (Some(Ok((id, secret))), _) => (id, secret, true),
        (Some(Err(())), _) => {
            return (
                error(
                    StatusCode::UNAUTHORIZED,
                    "invalid_client",
                    "the Basic credentials are not base64 of client_id:client_secret",
                    true,
                ),
                false,
            );
        }
        (None, (Some(id), Some(secret))) => (id.clone(), secret.clone(), false),
        (None, _) => {
            return (
                error(
                    StatusCode::UNAUTHORIZED,
                    "invalid_client",
                    "no client authentication: send HTTP Basic client_id:client_secret",
                    true,
                ),
                false,
            );
        }
    };
    if id != client.client_id || secret.as_bytes() != client.client_secret.as_bytes() {
        return (
            error(
                StatusCode::UNAUTHORIZED,
                "invalid_client",
                "unknown client or wrong secret",
                used_basic,
            ),
            false,
        );
    }
    match params.get("grant_type").map(String::as_str) {
        Some("client_credentials") => {}
        Some(_) => {
            return (
                error(
                    StatusCode::BAD_REQUEST,
                    "unsupported_grant_type",
                    "this endpoint issues tokens for grant_type=client_credentials only",
                    false,
                ),
                false,
            );
        }
        None => {
            return (
                error(
                    StatusCode::BAD_REQUEST,
                    "invalid_request",
                    "grant_type is required",
                    false,
                ),
                false,
            );
        }
    }
    if let Some(scope_asked) = params.get("scope")
        && scope_asked.split(' ').any(|s| !s.is_empty() && s != scope)
    {
        return (
            error(
                StatusCode::BAD_REQUEST,
                "invalid_scope",
                &format!("the only scope is `{scope}`"),
                false,
            ),
            false,
        );
    }
    let token = tokens.issue(client.token_ttl);
    let body: Value = json!({
        "access_token": token,
        "token_type": "Bearer",
        "expires_in": client.token_ttl.as_secs().max(1),
        "scope": scope,
    });
    (
        (
            StatusCode::OK,
            [
                (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
                (header::PRAGMA, HeaderValue::from_static("no-cache")),
            ],
            axum::Json(body),
        )
            .into_response(),
        true,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client() -> OAuthClient {
        OAuthClient {
            client_id: "agentgate".into(),
            client_secret: "s3cret:with&odd=chars".into(),
            token_ttl: Duration::from_secs(60),
        }
    }

    fn basic(id: &str, secret: &str) -> HeaderMap {
        let encode = |s: &str| form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
        let value = base64::engine::general_purpose::STANDARD.encode(format!(
            "{}:{}",
            encode(id),
            encode(secret)
        ));
        let mut headers = HeaderMap::new();
        headers.insert(
            header::AUTHORIZATION,
            HeaderValue::from_str(&format!("Basic {value}")).expect("header"),
        );
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/x-www-form-urlencoded"),
        );
        headers
    }

    #[test]
    fn basic_credentials_are_form_urldecoded_and_issue_a_token() {
        let mut tokens = Tokens::default();
        let headers = basic("agentgate", "s3cret:with&odd=chars");
        let (response, issued) = token_request(
            Some(&client()),
            "a2a.invoke",
            &mut tokens,
            &headers,
            &Bytes::from_static(b"grant_type=client_credentials&scope=a2a.invoke"),
        );
        assert_eq!(response.status(), StatusCode::OK);
        assert!(issued);
        assert_eq!(tokens.issued.len(), 1);
        let token = tokens.issued.keys().next().expect("one").clone();
        assert!(tokens.valid(&token));
        tokens.revoke_all();
        assert!(!tokens.valid(&token));
    }

    #[test]
    fn wrong_secret_grant_and_scope_are_refused_with_rfc_codes() {
        let mut tokens = Tokens::default();
        for (headers, body, status) in [
            (
                basic("agentgate", "wrong"),
                "grant_type=client_credentials",
                StatusCode::UNAUTHORIZED,
            ),
            (
                basic("agentgate", "s3cret:with&odd=chars"),
                "grant_type=password",
                StatusCode::BAD_REQUEST,
            ),
            (
                basic("agentgate", "s3cret:with&odd=chars"),
                "grant_type=client_credentials&scope=admin",
                StatusCode::BAD_REQUEST,
            ),
        ] {
            let (response, issued) = token_request(
                Some(&client()),
                "a2a.invoke",
                &mut tokens,
                &headers,
                &Bytes::from(body.to_owned()),
            );
            assert_eq!(response.status(), status, "{body}");
            assert!(!issued);
        }
        assert!(tokens.issued.is_empty());
    }
}
