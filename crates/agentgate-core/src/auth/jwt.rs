//! OAuth 2.1 resource-server mode (`mode = "oauth"`): access tokens are JWTs
//! from one configured issuer, checked against the issuer's JWKS.
//!
//! Checks: the header's `typ` is `at+jwt` (RFC 9068 §4, unless
//! `require_at_jwt_typ = false`: an ID token the same issuer signed for the
//! same client is typed `JWT` and is not an access token), its `alg` is one
//! of the allowed asymmetric algorithms (`none` and HMAC are never accepted:
//! the JWKS is public), the signature with the key named by `kid`, `iss` =
//! the issuer, `aud` contains the audience (the resource URL unless
//! configured), `exp` (required) and `nbf`, with `leeway_seconds` of clock
//! skew, and a `sub`. The principal is `oauth:<iss>#<sub>`; it carries the
//! token's scopes (`scope`, a space-separated string, or `scp`, an array or
//! a string, as some issuers write it) and its `exp`.
//!
//! The JWKS comes from `jwks_uri`, or from the issuer's metadata
//! (`/.well-known/oauth-authorization-server`, RFC 8414, then
//! `/.well-known/openid-configuration`). It is cached; a token naming an
//! unknown `kid` (the issuer rotated its keys) or a cache older than an hour
//! fetches it again, but at most once per `jwks_min_refresh_seconds`, so a
//! flood of made-up `kid`s cannot make this server hammer the issuer.

use std::time::{Duration, Instant, SystemTime};

use agentgate_backend::Owner;
use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;
use tokio::sync::{Mutex, RwLock};

use super::{AuthError, OAuthConfig, Principal, Rejection};

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
    require_at_jwt_typ: bool,
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
    exp: u64,
    /// RFC 8693 §4.2 / RFC 9068 §2.2.3: space-separated.
    #[serde(default)]
    scope: Option<String>,
    /// What Okta, Entra ID and others send instead.
    #[serde(default)]
    scp: Option<Scp>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Scp {
    List(Vec<String>),
    Text(String),
}

impl Claims {
    /// Every scope of `scope` and `scp`, without duplicates.
    fn scopes(&self) -> Vec<String> {
        let mut scopes: Vec<String> = Vec::new();
        let words = self
            .scope
            .iter()
            .flat_map(|s| s.split_ascii_whitespace().map(str::to_owned));
        let listed: Vec<String> = match &self.scp {
            Some(Scp::List(list)) => list.clone(),
            Some(Scp::Text(text)) => text.split_ascii_whitespace().map(str::to_owned).collect(),
            None => Vec::new(),
        };
        for scope in words.chain(listed) {
            if !scope.is_empty() && !scopes.contains(&scope) {
                scopes.push(scope);
            }
        }
        scopes
    }
}

/// RFC 9068 §4: `at+jwt`, or the full media type; compared
/// case-insensitively (RFC 7515 §4.1.9 media types are).
fn is_access_token_typ(typ: Option<&str>) -> bool {
    typ.is_some_and(|typ| {
        let typ = typ.trim();
        typ.eq_ignore_ascii_case("at+jwt") || typ.eq_ignore_ascii_case("application/at+jwt")
    })
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
            require_at_jwt_typ: config.require_at_jwt_typ,
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
    pub async fn verify(&self, token: &str) -> Result<Principal, Rejection> {
        let header = jsonwebtoken::decode_header(token)
            .map_err(|e| Rejection::Invalid(format!("not a JWT we accept ({e})")))?;
        // Before any key is fetched: a wrongly typed token costs nothing.
        if self.require_at_jwt_typ && !is_access_token_typ(header.typ.as_deref()) {
            return Err(Rejection::Invalid(format!(
                "typ {:?} is not at+jwt: not an RFC 9068 access token (an ID token?)",
                header.typ
            )));
        }
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
        let claims = data.claims;
        Ok(Principal {
            owner: Owner::new(format!("oauth:{}#{}", claims.iss, claims.sub)),
            scopes: claims.scopes(),
            expires_at: SystemTime::UNIX_EPOCH.checked_add(Duration::from_secs(claims.exp)),
            token: Some(agentgate_backend::AccessToken::new(token)),
        })
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
    fn only_access_token_types_pass() {
        for typ in [
            "at+jwt",
            "AT+JWT",
            "application/at+jwt",
            "Application/AT+JWT",
        ] {
            assert!(is_access_token_typ(Some(typ)), "{typ}");
        }
        for typ in [Some("JWT"), Some("jwt"), Some("at+jwt+x"), Some(""), None] {
            assert!(!is_access_token_typ(typ), "{typ:?}");
        }
    }

    #[test]
    fn scopes_come_from_scope_and_scp_in_either_form() {
        let claims = |extra: serde_json::Value| -> Claims {
            let mut value = serde_json::json!({"iss": "i", "sub": "s", "exp": 1});
            if let (Some(map), Some(extra)) = (value.as_object_mut(), extra.as_object()) {
                map.extend(extra.clone());
            }
            serde_json::from_value(value).expect("claims")
        };
        assert_eq!(
            claims(serde_json::json!({"scope": "mcp  tasks:write"})).scopes(),
            vec!["mcp", "tasks:write"]
        );
        assert_eq!(
            claims(serde_json::json!({"scp": ["mcp", "deploy"]})).scopes(),
            vec!["mcp", "deploy"]
        );
        assert_eq!(
            claims(serde_json::json!({"scope": "mcp", "scp": "mcp deploy"})).scopes(),
            vec!["mcp", "deploy"]
        );
        assert!(claims(serde_json::json!({})).scopes().is_empty());
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
