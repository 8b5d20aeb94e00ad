//! How a JSON-RPC call to one agent authenticates: nothing, a fixed bearer
//! token, or an OAuth 2.0 access token got with the client credentials grant
//! (RFC 6749 §4.4) from the token endpoint the config names, or the card's
//! (`securitySchemes.*.oauth2SecurityScheme.flows.clientCredentials`) where
//! [`Guard::oauth`] allows it: the card only confirms the config's token URL
//! and scopes, and a token request that meets a redirect is refused, never
//! followed.
//!
//! ```text
//! call ─▶ Auth::header() ─ cached token still valid? ─ yes ─▶ Authorization: Bearer …
//!                          └ no: POST token endpoint (oauth2 crate; Basic client auth) ─▶ cache
//! 401  ─▶ Auth::rejected(token) drops it ─▶ the call is made once more with a new one
//! ```
//!
//! The token request is made by the `oauth2` crate (an RFC 6749 client of its
//! own, not ours), over a reqwest client that follows no redirects. A token
//! is kept until `expires_in` says it ends (less a margin), or until an agent
//! answers 401; a response without `expires_in` is kept until a 401. One
//! fetch at a time: concurrent calls wait for it instead of stampeding the
//! endpoint. The client secret and tokens never reach a log, an error or the
//! store (their `Debug` is redacted; token endpoint errors carry the RFC
//! error code and description, never the body). The token endpoint's answer
//! is read up to [`TOKEN_ANSWER_CAP`]; a larger one fails without a retry.

use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, Instant};

use agentgate_backend::{UpstreamMetrics, UpstreamOutcome};
use oauth2::basic::{BasicClient, BasicErrorResponseType};
use oauth2::{
    ClientId, ClientSecret, HttpRequest, HttpResponse, RequestTokenError, Scope, TokenResponse,
    TokenUrl,
};
use reqwest::header::HeaderValue;

use crate::config::{Credentials, OAuthSettings, Secret};
use crate::guard::{Guard, origin_of};

/// A token is renewed this long before its `expires_in` runs out, so a call
/// never leaves with one that ends on the way.
const EXPIRY_MARGIN: Duration = Duration::from_secs(30);

/// The most of a token endpoint's answer read: an RFC 6749 token response
/// is a few hundred bytes (a JWT access token a few KiB).
pub const TOKEN_ANSWER_CAP: usize = 64 * 1024;

/// The metrics operation of a token request.
pub const TOKEN_OPERATION: &str = "OAuthToken";

/// Why no `Authorization` header could be made.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum AuthError {
    /// The token endpoint did not answer, answered 429 or 5xx: try later.
    #[error("the OAuth token endpoint {url} is unavailable: {detail}")]
    Unavailable { url: String, detail: String },
    /// The token endpoint refused (RFC 6749 §5.2) or the setup is wrong.
    #[error("{0}")]
    Refused(String),
}

/// An access token and when it stops being used.
#[derive(Debug, Clone)]
struct Cached {
    token: Secret,
    until: Option<Instant>,
}

/// The OAuth client of one agent.
#[derive(Debug)]
struct OAuth {
    settings: OAuthSettings,
    /// `agents[i].oauth`, for messages.
    at: String,
    http: reqwest::Client,
    /// Where the token request may go.
    guard: Guard,
    /// The card's client-credentials flow: token URL and scopes.
    card_flow: RwLock<Option<(String, Vec<String>)>>,
    cache: tokio::sync::Mutex<Option<Cached>>,
}

/// How calls to one agent authenticate.
#[derive(Debug, Clone)]
pub struct Auth(Arc<Kind>);

#[derive(Debug)]
enum Kind {
    None,
    Bearer(Secret),
    OAuth(Box<OAuth>),
}

fn bearer(token: &Secret) -> Result<HeaderValue, AuthError> {
    let mut value = HeaderValue::from_str(&format!("Bearer {}", token.expose())).map_err(|_| {
        AuthError::Refused("the bearer token is not a valid HTTP header value".into())
    })?;
    value.set_sensitive(true);
    Ok(value)
}

impl Auth {
    /// `credentials` of the agent configured at `at` (`agents[0]`); token
    /// requests go through `http` (which must not follow redirects), where
    /// `guard` lets them.
    pub fn new(credentials: &Credentials, at: &str, http: reqwest::Client, guard: Guard) -> Self {
        Self(Arc::new(match credentials {
            Credentials::None => Kind::None,
            Credentials::Bearer(token) => Kind::Bearer(token.clone()),
            Credentials::OAuth(settings) => Kind::OAuth(Box::new(OAuth {
                settings: settings.clone(),
                at: format!("{at}.oauth"),
                http,
                guard,
                card_flow: RwLock::new(None),
                cache: tokio::sync::Mutex::new(None),
            })),
        }))
    }

    /// A fixed bearer token (a principal's own).
    pub fn bearer(token: Secret) -> Self {
        Self(Arc::new(Kind::Bearer(token)))
    }

    /// Whether a 401 may be cured by a new token.
    pub fn renews(&self) -> bool {
        matches!(*self.0, Kind::OAuth(_))
    }

    /// Takes note of the card's client-credentials flow (used when the
    /// config names no token URL).
    pub fn card_flow(&self, flow: Option<(String, Vec<String>)>) {
        if let Kind::OAuth(oauth) = &*self.0 {
            *oauth
                .card_flow
                .write()
                .unwrap_or_else(PoisonError::into_inner) = flow;
        }
    }

    /// The `Authorization` header of the next call, fetching a token if
    /// none is cached or it ran out.
    pub async fn header(
        &self,
        metrics: &UpstreamMetrics,
    ) -> Result<Option<HeaderValue>, AuthError> {
        match &*self.0 {
            Kind::None => Ok(None),
            Kind::Bearer(token) => bearer(token).map(Some),
            Kind::OAuth(oauth) => {
                let mut cache = oauth.cache.lock().await;
                if let Some(cached) = cache.as_ref()
                    && cached.until.is_none_or(|until| Instant::now() < until)
                {
                    return bearer(&cached.token).map(Some);
                }
                let fresh = oauth.fetch(metrics).await?;
                let value = bearer(&fresh.token)?;
                *cache = Some(fresh);
                Ok(Some(value))
            }
        }
    }

    /// An agent answered 401 to a call that carried `sent`: that token is
    /// not used again (a newer one fetched meanwhile is kept).
    pub async fn rejected(&self, sent: &HeaderValue) {
        if let Kind::OAuth(oauth) = &*self.0 {
            let mut cache = oauth.cache.lock().await;
            let same = cache
                .as_ref()
                .and_then(|c| bearer(&c.token).ok())
                .is_some_and(|current| current == *sent);
            if same {
                *cache = None;
            }
        }
    }
}

/// What the token endpoint's HTTP client saw and failed with.
#[derive(Debug, thiserror::Error)]
enum Transport {
    #[error("{0}")]
    Failed(String),
    /// The guard's resolver refused the address.
    #[error("{0}")]
    Refused(crate::guard::Refused),
    /// The answer was over [`TOKEN_ANSWER_CAP`].
    #[error("the answer is {0}")]
    TooLarge(agentgate_backend::TooLarge),
}

/// The `oauth2` crate's HTTP client: our reqwest client (no redirects),
/// keeping the answer's status so a 5xx is told apart from a refusal.
struct TokenHttp {
    http: reqwest::Client,
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
            let response = self.http.execute(request).await.map_err(|e| {
                match crate::guard::refused_in(&e) {
                    Some(refused) => Transport::Refused(refused),
                    None => Transport::Failed(crate::client::plain(&e)),
                }
            })?;
            self.status
                .store(response.status().as_u16(), Ordering::Relaxed);
            if response.status().is_redirection() {
                *self.redirect.lock().unwrap_or_else(PoisonError::into_inner) =
                    Some(crate::client::location_origin(&response));
            }
            let mut built = oauth2::http::Response::builder().status(response.status());
            for (name, value) in response.headers() {
                built = built.header(name, value);
            }
            let body = agentgate_backend::read_bounded(response, TOKEN_ANSWER_CAP)
                .await
                .map_err(|e| match e {
                    agentgate_backend::BodyError::TooLarge(limit) => Transport::TooLarge(limit),
                    agentgate_backend::BodyError::Cut(e) => Transport::Failed(format!(
                        "the answer was cut: {}",
                        crate::client::plain(&e)
                    )),
                })?;
            built
                .body(body)
                .map_err(|e| Transport::Failed(e.to_string()))
        })
    }
}

impl OAuth {
    /// The token URL and scopes to use: the config's, which the card may
    /// only confirm (see `guard.rs`).
    fn endpoint(&self) -> Result<(url::Url, Vec<String>), AuthError> {
        let card = self
            .card_flow
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        self.guard
            .oauth(
                self.settings.token_url.as_ref(),
                &self.settings.scopes,
                card.as_ref(),
            )
            .map_err(|refused| AuthError::Refused(refused.0))
    }

    async fn fetch(&self, metrics: &UpstreamMetrics) -> Result<Cached, AuthError> {
        let (url, scopes) = self.endpoint()?;
        let client = BasicClient::new(ClientId::new(self.settings.client_id.clone()))
            .set_client_secret(ClientSecret::new(
                self.settings.client_secret.expose().to_owned(),
            ))
            .set_token_uri(TokenUrl::from_url(url.clone()));
        let send = TokenHttp {
            http: self.http.clone(),
            status: Arc::new(AtomicU16::new(0)),
            redirect: std::sync::Mutex::new(None),
        };
        let requested_at = Instant::now();
        let answer = client
            .exchange_client_credentials()
            .add_scopes(scopes.into_iter().map(Scope::new))
            .request_async(&send)
            .await;
        let status = send.status.load(Ordering::Relaxed);
        let shown_url = url.as_str().to_owned();
        let redirect = send
            .redirect
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(to) = redirect {
            // The request carried the client secret: it goes to the URL the
            // config allowed and nowhere else, whatever the answer says.
            metrics.record(TOKEN_OPERATION, UpstreamOutcome::from_status(status));
            return Err(AuthError::Refused(format!(
                "the OAuth token endpoint {} answered HTTP {status}, redirecting to {to}; \
                 agentgate does not follow redirects of token requests: set {}.token_url to \
                 the endpoint itself",
                origin_of(&url),
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
                    token: Secret::new(token.access_token().secret().clone()),
                    until,
                })
            }
            Err(RequestTokenError::Request(Transport::Refused(refused))) => {
                Err(AuthError::Refused(refused.0))
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
                        self.at, self.settings.client_secret_env
                    ),
                    BasicErrorResponseType::InvalidScope => {
                        format!("; check {}.scopes", self.at)
                    }
                    _ => String::new(),
                };
                // The server's words, minus the secret should it echo it.
                let secret = self.settings.client_secret.expose();
                let said = e
                    .error_description()
                    .map(|d| format!(": {}", d.replace(secret, "<redacted>")))
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
