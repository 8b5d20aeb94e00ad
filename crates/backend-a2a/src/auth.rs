//! How a JSON-RPC call to one agent authenticates: nothing, a fixed bearer
//! token, or an OAuth 2.0 access token got with the client credentials grant
//! (RFC 6749 §4.4) from the token endpoint the config names, or the card's
//! (`securitySchemes.*.oauth2SecurityScheme.flows.clientCredentials`) where
//! [`Guard::oauth`] allows it: the card only confirms the config's token URL
//! and scopes, and a token request that meets a redirect is refused, never
//! followed.
//!
//! ```text
//! call ─▶ Auth::header() ─ the guard's token URL ─▶ ClientCredentials::token ─▶ Authorization: Bearer …
//!            (agentgate_backend::oauth: cached, or POSTed for with Basic client auth)
//! 401  ─▶ Auth::rejected(token) drops it ─▶ the call is made once more with a new one
//! ```
//!
//! The token request is made by the backend SDK's `oauth` module (the
//! `oauth2` crate, over a reqwest client that follows no redirects). A token
//! is kept until `expires_in` says it ends (less a margin), or until an agent
//! answers 401; a response without `expires_in` is kept until a 401. One
//! fetch at a time: concurrent calls wait for it instead of stampeding the
//! endpoint. The client secret and tokens never reach a log, an error or the
//! store (their `Debug` is redacted; token endpoint errors carry the RFC
//! error code and description, never the body). The token endpoint's answer
//! is read up to [`TOKEN_ANSWER_CAP`]; a larger one fails without a retry.

use std::sync::{Arc, PoisonError, RwLock};

use agentgate_backend::UpstreamMetrics;
pub use agentgate_backend::oauth::{AuthError, TOKEN_ANSWER_CAP, TOKEN_OPERATION};
use agentgate_backend::oauth::{BearerToken, ClientCredentials};
use reqwest::header::HeaderValue;

use crate::config::{Credentials, OAuthSettings, Secret};
use crate::guard::Guard;

/// The OAuth client of one agent.
#[derive(Debug)]
struct OAuth {
    settings: OAuthSettings,
    client: ClientCredentials,
    /// Where the token request may go.
    guard: Guard,
    /// The card's client-credentials flow: token URL and scopes.
    card_flow: RwLock<Option<(String, Vec<String>)>>,
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

fn bearer(token: &str) -> Result<HeaderValue, AuthError> {
    let mut value = HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
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
                client: ClientCredentials::new(
                    settings.client_id.clone(),
                    settings.client_secret.expose(),
                    settings.client_secret_env.clone(),
                    format!("{at}.oauth"),
                    http,
                )
                .with_refusals(|e| crate::guard::refused_in(e).map(|refused| refused.0)),
                settings: settings.clone(),
                guard,
                card_flow: RwLock::new(None),
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
            Kind::Bearer(token) => bearer(token.expose()).map(Some),
            Kind::OAuth(oauth) => {
                let (url, scopes) = oauth.endpoint()?;
                let token = oauth.client.token(&url, &scopes, &[], metrics).await?;
                bearer(token.expose()).map(Some)
            }
        }
    }

    /// An agent answered 401 to a call that carried `sent`: that token is
    /// not used again (a newer one fetched meanwhile is kept).
    pub async fn rejected(&self, sent: &HeaderValue) {
        if let Kind::OAuth(oauth) = &*self.0 {
            let carried =
                |token: &BearerToken| bearer(token.expose()).is_ok_and(|current| current == *sent);
            oauth.client.rejected(carried).await;
        }
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
}
