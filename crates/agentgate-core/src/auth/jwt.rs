//! OAuth 2.1 resource-server mode (`mode = "oauth"`): access tokens are JWTs
//! from one configured issuer, checked against the issuer's JWKS.
//!
//! Checks: the header's `alg` is one of the allowed asymmetric algorithms
//! (`none` and HMAC are never accepted: the JWKS is public), the signature
//! with the key named by `kid`, `iss` = the issuer, `aud` contains the
//! audience (the resource URL unless configured), `exp` (required) and
//! `nbf`, with `leeway_seconds` of clock skew, and a `sub`. The principal is
//! `oauth:<iss>#<sub>`.
//!
//! The JWKS comes from `jwks_uri`, or from the issuer's metadata
//! (`/.well-known/oauth-authorization-server`, RFC 8414, then
//! `/.well-known/openid-configuration`). It is cached; a token naming an
//! unknown `kid` (the issuer rotated its keys) or a cache older than an hour
//! fetches it again, but at most once per `jwks_min_refresh_seconds`, so a
//! flood of made-up `kid`s cannot make this server hammer the issuer.

use std::time::{Duration, Instant};

use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;
use tokio::sync::{Mutex, RwLock};

use super::{AuthError, OAuthConfig, Rejection};
use crate::task::Owner;

/// A cached JWKS older than this is fetched again (rate limit permitting).
const JWKS_MAX_AGE: Duration = Duration::from_secs(3600);
const HTTP_TIMEOUT: Duration = Duration::from_secs(10);

/// Checks JWT access tokens of one issuer.
#[derive(Debug)]
pub struct JwtVerifier {
    issuer: String,
    audience: String,
    algorithms: Vec<Algorithm>,
    leeway: u64,
    min_refresh: Duration,
    configured_jwks_uri: Option<String>,
    http: reqwest::Client,
    keys: RwLock<Cached>,
    /// Held while fetching, so concurrent misses make one request.
    refresh: Mutex<Option<Instant>>,
}

#[derive(Debug, Default)]
struct Cached {
    jwks_uri: Option<String>,
    set: Option<JwkSet>,
    fetched_at: Option<Instant>,
}

#[derive(Deserialize)]
struct Claims {
    iss: String,
    sub: String,
}

#[derive(Deserialize)]
struct IssuerMetadata {
    issuer: Option<String>,
    jwks_uri: String,
}

impl JwtVerifier {
    /// Builds the verifier; `audience` is the resource URL when the config
    /// names none. Nothing is fetched until the first token arrives.
    pub fn new(config: &OAuthConfig, resource: &str) -> Result<Self, AuthError> {
        let issuer = config.issuer.trim().to_owned();
        if url::Url::parse(&issuer).is_err() {
            return Err(AuthError::Config(format!(
                "auth.oauth.issuer must be the authorization server's issuer URL, e.g. \
                 \"https://auth.example.com\", got {issuer:?}"
            )));
        }
        let mut algorithms = Vec::new();
        for name in &config.algorithms {
            let alg: Algorithm = name.parse().map_err(|_| {
                AuthError::Config(format!(
                    "auth.oauth.algorithms: unknown algorithm {name:?} (use RS256, ES256, …)"
                ))
            })?;
            if matches!(alg, Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512) {
                return Err(AuthError::Config(format!(
                    "auth.oauth.algorithms: {name} is a shared-secret algorithm; a resource \
                     server checks public keys only (RS*, PS*, ES*, EdDSA)"
                )));
            }
            algorithms.push(alg);
        }
        if algorithms.is_empty() {
            return Err(AuthError::Config(
                "auth.oauth.algorithms is empty; leave it out for RS256 and ES256".into(),
            ));
        }
        let http = reqwest::Client::builder()
            .timeout(HTTP_TIMEOUT)
            .build()
            .map_err(|e| AuthError::Config(format!("building the JWKS HTTP client: {e}")))?;
        Ok(Self {
            issuer,
            audience: config
                .audience
                .clone()
                .unwrap_or_else(|| resource.to_owned()),
            algorithms,
            leeway: config.leeway_seconds,
            min_refresh: Duration::from_secs(config.jwks_min_refresh_seconds),
            configured_jwks_uri: config.jwks_uri.clone(),
            http,
            keys: RwLock::new(Cached::default()),
            refresh: Mutex::new(None),
        })
    }

    /// The issuer, for the protected-resource metadata.
    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// The token's principal, or why it is refused.
    pub async fn verify(&self, token: &str) -> Result<Owner, Rejection> {
        let header = jsonwebtoken::decode_header(token)
            .map_err(|e| Rejection::Invalid(format!("not a JWT we accept ({e})")))?;
        if !self.algorithms.contains(&header.alg) {
            return Err(Rejection::Invalid(format!(
                "algorithm {:?} is not allowed",
                header.alg
            )));
        }
        let jwk = self.key(header.kid.as_deref()).await?;
        if let Some(alg) = jwk.common.key_algorithm
            && format!("{alg:?}") != format!("{:?}", header.alg)
        {
            return Err(Rejection::Invalid(format!(
                "key is for {alg:?}, token says {:?}",
                header.alg
            )));
        }
        let key = DecodingKey::from_jwk(&jwk)
            .map_err(|e| Rejection::Invalid(format!("unusable key in the JWKS ({e})")))?;
        let mut validation = Validation::new(header.alg);
        validation.set_issuer(&[&self.issuer]);
        validation.set_audience(&[&self.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        validation.leeway = self.leeway;
        validation.validate_nbf = true;
        let data = jsonwebtoken::decode::<Claims>(token, &key, &validation)
            .map_err(|e| Rejection::Invalid(format!("token refused: {e}")))?;
        Ok(Owner::new(format!(
            "oauth:{}#{}",
            data.claims.iss, data.claims.sub
        )))
    }

    /// The JWK for `kid` (or the only key, when the token names none),
    /// fetching the JWKS when it is missing, stale or lacks the key.
    async fn key(&self, kid: Option<&str>) -> Result<Jwk, Rejection> {
        {
            let cached = self.keys.read().await;
            if let Some(set) = &cached.set
                && cached
                    .fetched_at
                    .is_some_and(|t| t.elapsed() < JWKS_MAX_AGE)
                && let Some(jwk) = pick(set, kid)
            {
                return Ok(jwk);
            }
        }
        let mut last = self.refresh.lock().await;
        let may_fetch = last.is_none_or(|t| t.elapsed() >= self.min_refresh);
        if may_fetch {
            *last = Some(Instant::now());
            match self.fetch().await {
                Ok((uri, set)) => {
                    let mut cached = self.keys.write().await;
                    cached.jwks_uri = Some(uri);
                    cached.set = Some(set);
                    cached.fetched_at = Some(Instant::now());
                }
                Err(e) => {
                    tracing::warn!(issuer = %self.issuer, error = %e, "fetching the JWKS failed");
                }
            }
        }
        drop(last);
        let cached = self.keys.read().await;
        match &cached.set {
            None => Err(Rejection::Unavailable(
                "the issuer's signing keys could not be fetched".into(),
            )),
            Some(set) => pick(set, kid).ok_or_else(|| {
                Rejection::Invalid(match kid {
                    Some(kid) => format!("no key with kid {kid:?} in the issuer's JWKS"),
                    None => "the token names no kid and the JWKS has several keys".into(),
                })
            }),
        }
    }

    async fn fetch(&self) -> Result<(String, JwkSet), String> {
        let uri = match &self.configured_jwks_uri {
            Some(uri) => uri.clone(),
            None => {
                let known = self.keys.read().await.jwks_uri.clone();
                match known {
                    Some(uri) => uri,
                    None => self.discover().await?,
                }
            }
        };
        let set = self
            .get_json::<JwkSet>(&uri)
            .await
            .map_err(|e| format!("JWKS {uri}: {e}"))?;
        tracing::debug!(%uri, keys = set.keys.len(), "JWKS fetched");
        Ok((uri, set))
    }

    /// The issuer's `jwks_uri`, from RFC 8414 metadata or OpenID discovery.
    async fn discover(&self) -> Result<String, String> {
        let mut problems = Vec::new();
        for url in metadata_urls(&self.issuer) {
            match self.get_json::<IssuerMetadata>(&url).await {
                Ok(meta) => {
                    if let Some(issuer) = &meta.issuer
                        && issuer.trim_end_matches('/') != self.issuer.trim_end_matches('/')
                    {
                        problems.push(format!("{url} names issuer {issuer:?}"));
                        continue;
                    }
                    return Ok(meta.jwks_uri);
                }
                Err(e) => problems.push(format!("{url}: {e}")),
            }
        }
        Err(format!(
            "no issuer metadata with a jwks_uri (set auth.oauth.jwks_uri): {}",
            problems.join("; ")
        ))
    }

    async fn get_json<T: serde::de::DeserializeOwned>(&self, url: &str) -> Result<T, String> {
        let response = self
            .http
            .get(url)
            .header("accept", "application/json")
            .send()
            .await
            .map_err(|e| e.to_string())?;
        if !response.status().is_success() {
            return Err(format!("HTTP {}", response.status()));
        }
        response.json::<T>().await.map_err(|e| e.to_string())
    }
}

fn pick(set: &JwkSet, kid: Option<&str>) -> Option<Jwk> {
    match kid {
        Some(kid) => set.find(kid).cloned(),
        None if set.keys.len() == 1 => set.keys.first().cloned(),
        None => None,
    }
}

/// Where an issuer's metadata may be: RFC 8414 inserts the well-known
/// segment before the issuer's path, OpenID Connect appends it.
fn metadata_urls(issuer: &str) -> Vec<String> {
    let issuer = issuer.trim_end_matches('/');
    let mut urls = Vec::new();
    if let Ok(url) = url::Url::parse(issuer) {
        let origin = url.origin().ascii_serialization();
        let path = url.path().trim_end_matches('/');
        urls.push(format!(
            "{origin}/.well-known/oauth-authorization-server{path}"
        ));
    }
    urls.push(format!("{issuer}/.well-known/openid-configuration"));
    urls
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_urls_follow_rfc8414_then_openid() {
        assert_eq!(
            metadata_urls("https://auth.example.com/tenant1/"),
            vec![
                "https://auth.example.com/.well-known/oauth-authorization-server/tenant1",
                "https://auth.example.com/tenant1/.well-known/openid-configuration",
            ]
        );
    }

    #[test]
    fn shared_secret_algorithms_are_refused() {
        let config = OAuthConfig {
            issuer: "https://auth.example.com".into(),
            algorithms: vec!["HS256".into()],
            ..OAuthConfig::default()
        };
        let err = JwtVerifier::new(&config, "https://mcp.example.com/mcp").expect_err("HS256");
        assert!(err.to_string().contains("auth.oauth.algorithms"), "{err}");
    }
}
