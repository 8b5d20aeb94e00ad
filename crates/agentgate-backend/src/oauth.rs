//! OAuth 2.0 access tokens by the client credentials grant (RFC 6749 §4.4),
//! for a backend whose upstream wants a bearer token from a token endpoint
//! (A2A agents, MCP servers).
//!
//! ```text
//! call ─▶ ClientCredentials::token(url, scopes, extra)
//!           cached and not about to run out? ─ yes ─▶ the token
//!           └ no: POST url (oauth2 crate; Basic client auth) ─▶ cache ─▶ the token
//! upstream answers 401 ─▶ ClientCredentials::rejected(…) drops it; the next call fetches anew
//! ```
//!
//! The token request is made by the `oauth2` crate (an RFC 6749 client of
//! its own, not ours), over the caller's reqwest client, which must follow
//! no redirects: the request carries the client secret, so it goes to the
//! URL the operator configured and nowhere else, and a redirect is reported,
//! never followed. A token is kept until `expires_in` says it ends (less a
//! margin), or until the upstream answers 401; one without `expires_in`
//! until a 401. One fetch at a time: concurrent calls wait for it instead of
//! stampeding the endpoint. The secret and tokens never reach a log, an
//! error or the store (their `Debug` is redacted; token endpoint errors
//! carry the RFC error code and description, never the body). The answer is
//! read up to [`TOKEN_ANSWER_CAP`]; a larger one fails without a retry.

use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, PoisonError};
use std::time::{Duration, Instant};

use oauth2::basic::{BasicClient, BasicErrorResponseType};
use oauth2::{
    ClientId, ClientSecret, HttpRequest, HttpResponse, RequestTokenError, Scope, TokenResponse,
    TokenUrl,
};

use crate::{UpstreamMetrics, UpstreamOutcome};

/// A token is renewed this long before its `expires_in` runs out, so a call
/// never leaves with one that ends on the way.
const EXPIRY_MARGIN: Duration = Duration::from_secs(30);

/// The most of a token endpoint's answer read: an RFC 6749 token response
/// is a few hundred bytes (a JWT access token a few KiB).
pub const TOKEN_ANSWER_CAP: usize = 64 * 1024;

/// The metrics operation of a token request.
pub const TOKEN_OPERATION: &str = "OAuthToken";

/// Why no access token could be had.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum AuthError {
    /// The token endpoint did not answer, answered 429 or 5xx: try later.
    #[error("the OAuth token endpoint {url} is unavailable: {detail}")]
    Unavailable {
        /// The token endpoint.
        url: String,
        /// What happened.
        detail: String,
    },
    /// The token endpoint refused (RFC 6749 §5.2) or the setup is wrong.
    #[error("{0}")]
    Refused(String),
}

/// An access token; its `Debug` is redacted.
#[derive(Clone, PartialEq, Eq)]
pub struct BearerToken(String);

impl BearerToken {
    /// The token itself, for the one header it goes in.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for BearerToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BearerToken(<redacted>)")
    }
}

/// Finds, in a failed token request's error chain, the reason a caller's
/// own HTTP client refused to connect (an address a guard forbids), so it
/// is told as such rather than as "unavailable".
pub type RefusedIn = fn(&(dyn std::error::Error + 'static)) -> Option<String>;

#[derive(Debug, Clone)]
struct Cached {
    token: BearerToken,
    until: Option<Instant>,
}

/// One OAuth client (id and secret) and the token it holds.
pub struct ClientCredentials {
    client_id: String,
    client_secret: String,
    /// Where the secret came from, for messages.
    client_secret_env: String,
    /// The settings' path (`servers[0].oauth`), for messages.
    at: String,
    http: reqwest::Client,
    refused_in: RefusedIn,
    cache: tokio::sync::Mutex<Option<Cached>>,
}

impl std::fmt::Debug for ClientCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientCredentials")
            .field("client_id", &self.client_id)
            .field("client_secret", &"<redacted>")
            .field("client_secret_env", &self.client_secret_env)
            .field("at", &self.at)
            .finish_non_exhaustive()
    }
}

impl ClientCredentials {
    /// The client `client_id` with `client_secret` (read from the variable
    /// `client_secret_env`), configured at `at`; token requests go through
    /// `http`, which must not follow redirects.
    pub fn new(
        client_id: impl Into<String>,
        client_secret: impl Into<String>,
        client_secret_env: impl Into<String>,
        at: impl Into<String>,
        http: reqwest::Client,
    ) -> Self {
        Self {
            client_id: client_id.into(),
            client_secret: client_secret.into(),
            client_secret_env: client_secret_env.into(),
            at: at.into(),
            http,
            refused_in: |_| None,
            cache: tokio::sync::Mutex::new(None),
        }
    }

    /// Tells refused connections apart (see [`RefusedIn`]).
    pub fn with_refusals(mut self, refused_in: RefusedIn) -> Self {
        self.refused_in = refused_in;
        self
    }

    /// The token for the next call: the cached one while it lasts, else a
    /// new one from `url` for `scopes`, with `extra` parameters (RFC 8707's
    /// `resource`, say) in the request.
    pub async fn token(
        &self,
        url: &url::Url,
        scopes: &[String],
        extra: &[(&str, &str)],
        metrics: &UpstreamMetrics,
    ) -> Result<BearerToken, AuthError> {
        let mut cache = self.cache.lock().await;
        if let Some(cached) = cache.as_ref()
            && cached.until.is_none_or(|until| Instant::now() < until)
        {
            return Ok(cached.token.clone());
        }
        let fresh = self.fetch(url, scopes, extra, metrics).await?;
        let token = fresh.token.clone();
        *cache = Some(fresh);
        Ok(token)
    }

    /// The upstream answered 401 to a call that carried the token `sent`
    /// says: it is not used again (a newer one fetched meanwhile is kept).
    pub async fn rejected(&self, sent: impl FnOnce(&BearerToken) -> bool) {
        let mut cache = self.cache.lock().await;
        if cache.as_ref().is_some_and(|c| sent(&c.token)) {
            *cache = None;
        }
    }

    async fn fetch(
        &self,
        url: &url::Url,
        scopes: &[String],
        extra: &[(&str, &str)],
        metrics: &UpstreamMetrics,
    ) -> Result<Cached, AuthError> {
        let client = BasicClient::new(ClientId::new(self.client_id.clone()))
            .set_client_secret(ClientSecret::new(self.client_secret.clone()))
            .set_token_uri(TokenUrl::from_url(url.clone()));
        let send = TokenHttp {
            http: self.http.clone(),
            refused_in: self.refused_in,
            status: Arc::new(AtomicU16::new(0)),
            redirect: std::sync::Mutex::new(None),
        };
        let requested_at = Instant::now();
        let mut request = client
            .exchange_client_credentials()
            .add_scopes(scopes.iter().cloned().map(Scope::new));
        for (name, value) in extra {
            request = request.add_extra_param(*name, *value);
        }
        let answer = request.request_async(&send).await;
        let status = send.status.load(Ordering::Relaxed);
        let shown_url = url.as_str().to_owned();
        let redirect = send
            .redirect
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(to) = redirect {
            metrics.record(TOKEN_OPERATION, UpstreamOutcome::from_status(status));
            return Err(AuthError::Refused(format!(
                "the OAuth token endpoint {} answered HTTP {status}, redirecting to {to}; \
                 agentgate does not follow redirects of token requests: set {}.token_url to \
                 the endpoint itself",
                url.origin().ascii_serialization(),
                self.at
            )));
        }
        match answer {
            Ok(token) => {
                metrics.record(TOKEN_OPERATION, UpstreamOutcome::Ok);
                let until = token
                    .expires_in()
                    .map(|ttl| requested_at + ttl.saturating_sub(EXPIRY_MARGIN.min(ttl / 2)));
                Ok(Cached {
                    token: BearerToken(token.access_token().secret().clone()),
                    until,
                })
            }
            Err(RequestTokenError::Request(Transport::Refused(refused))) => {
                Err(AuthError::Refused(refused))
            }
            Err(RequestTokenError::Request(Transport::TooLarge(limit))) => {
                // Not worth retrying: the endpoint would answer the same.
                metrics.record(TOKEN_OPERATION, UpstreamOutcome::ServerError);
                Err(AuthError::Refused(format!(
                    "the OAuth token endpoint {shown_url} answered HTTP {status} with an answer \
                     {limit}; check {}.token_url",
                    self.at
                )))
            }
            Err(RequestTokenError::Request(e)) => {
                metrics.record(TOKEN_OPERATION, UpstreamOutcome::Transport);
                Err(AuthError::Unavailable {
                    url: shown_url,
                    detail: format!("no answer: {e}"),
                })
            }
            Err(_) if status == 429 || status >= 500 => {
                metrics.record(TOKEN_OPERATION, UpstreamOutcome::from_status(status));
                Err(AuthError::Unavailable {
                    url: shown_url,
                    detail: format!("HTTP {status}"),
                })
            }
            Err(RequestTokenError::ServerResponse(e)) => {
                metrics.record(TOKEN_OPERATION, UpstreamOutcome::from_status(status));
                let hint = match e.error() {
                    BasicErrorResponseType::InvalidClient
                    | BasicErrorResponseType::UnauthorizedClient => format!(
                        "; check {}.client_id and the secret in `{}`",
                        self.at, self.client_secret_env
                    ),
                    BasicErrorResponseType::InvalidScope => {
                        format!("; check {}.scopes", self.at)
                    }
                    _ => String::new(),
                };
                // The server's words, minus the secret should it echo it.
                let said = e
                    .error_description()
                    .map(|d| format!(": {}", d.replace(&self.client_secret, "<redacted>")))
                    .unwrap_or_default();
                Err(AuthError::Refused(format!(
                    "the OAuth token endpoint {shown_url} refused the client credentials \
                     (HTTP {status}, {}{said}){hint}",
                    e.error(),
                )))
            }
            Err(RequestTokenError::Parse(e, _body)) => {
                // The body is never shown: it may hold a token.
                metrics.record(TOKEN_OPERATION, UpstreamOutcome::from_status(status));
                Err(AuthError::Refused(format!(
                    "the OAuth token endpoint {shown_url} answered HTTP {status} with something \
                     that is not an RFC 6749 token response (at `{}`); check {}.token_url",
                    e.path(),
                    self.at
                )))
            }
            Err(RequestTokenError::Other(why)) => {
                metrics.record(TOKEN_OPERATION, UpstreamOutcome::from_status(status));
                Err(AuthError::Refused(format!(
                    "the OAuth token endpoint {shown_url} answered HTTP {status}: {why}"
                )))
            }
        }
    }
}

/// What the token endpoint's HTTP client saw and failed with.
#[derive(Debug, thiserror::Error)]
enum Transport {
    #[error("{0}")]
    Failed(String),
    /// The caller's client refused the address ([`RefusedIn`]).
    #[error("{0}")]
    Refused(String),
    /// The answer was over [`TOKEN_ANSWER_CAP`].
    #[error("the answer is {0}")]
    TooLarge(crate::TooLarge),
}

/// The `oauth2` crate's HTTP client: the caller's reqwest client (no
/// redirects), keeping the answer's status so a 5xx is told apart from a
/// refusal.
struct TokenHttp {
    http: reqwest::Client,
    refused_in: RefusedIn,
    status: Arc<AtomicU16>,
    /// The origin a 3xx answer pointed at (never followed).
    redirect: std::sync::Mutex<Option<String>>,
}

impl<'c> oauth2::AsyncHttpClient<'c> for TokenHttp {
    type Error = Transport;
    type Future =
        std::pin::Pin<Box<dyn Future<Output = Result<HttpResponse, Transport>> + Send + 'c>>;

    fn call(&'c self, request: HttpRequest) -> Self::Future {
        Box::pin(async move {
            let request = reqwest::Request::try_from(request)
                .map_err(|e| Transport::Failed(e.to_string()))?;
            let response =
                self.http
                    .execute(request)
                    .await
                    .map_err(|e| match (self.refused_in)(&e) {
                        Some(refused) => Transport::Refused(refused),
                        None => Transport::Failed(chain(&e)),
                    })?;
            self.status
                .store(response.status().as_u16(), Ordering::Relaxed);
            if response.status().is_redirection() {
                let to = response
                    .headers()
                    .get(reqwest::header::LOCATION)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|to| response.url().join(to).ok())
                    .map_or_else(
                        || "no readable Location".to_owned(),
                        |to| to.origin().ascii_serialization(),
                    );
                *self.redirect.lock().unwrap_or_else(PoisonError::into_inner) = Some(to);
            }
            let mut built = oauth2::http::Response::builder().status(response.status());
            for (name, value) in response.headers() {
                built = built.header(name, value);
            }
            let body = crate::read_bounded(response, TOKEN_ANSWER_CAP)
                .await
                .map_err(|e| match e {
                    crate::BodyError::TooLarge(limit) => Transport::TooLarge(limit),
                    crate::BodyError::Cut(e) => {
                        Transport::Failed(format!("the answer was cut: {}", chain(&e)))
                    }
                })?;
            built
                .body(body)
                .map_err(|e| Transport::Failed(e.to_string()))
        })
    }
}

/// An error and its causes, on one line.
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
