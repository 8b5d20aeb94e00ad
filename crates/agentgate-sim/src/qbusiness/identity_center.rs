//! IAM Identity Center's token exchange and STS's identity-enhanced
//! `AssumeRole`: how a third-party app gets AWS credentials that speak for
//! one Identity Center user (AWS calls these *identity-aware sessions*), so
//! that Q Business answers as that user, with that user's document access.
//!
//! | method and path | service (signing name), protocol | operation |
//! |---|---|---|
//! | `POST /token?aws_iam=t` | SSO OIDC (`sso-oauth`), restJson1 | `CreateTokenWithIAM`, JWT-bearer grant |
//! | `POST /`, `Action=AssumeRole` | STS (`sts`), awsQuery | `AssumeRole` with `ProvidedContexts` |
//! | `POST /`, `Action=GetCallerIdentity` | STS (`sts`), awsQuery | who the operator's key is |
//!
//! Read from botocore's `sso-oidc/2019-06-10` and `sts/2011-06-15` service
//! models and AWS's guides to trusted token issuers and identity-enhanced
//! IAM role sessions; the unmodified `aws-sdk-ssooidc` and `aws-sdk-sts`
//! parse every answer, which is the contract test of these shapes.
//!
//! 1. `CreateTokenWithIAM`, signed with the operator's key, names the
//!    customer managed application (`clientId`) and the grant
//!    `urn:ietf:params:oauth:grant-type:jwt-bearer`, asserting a JWT of the
//!    trusted token issuer. The emulator checks it as Identity Center does:
//!    the signature against the issuer's JWKS (fetched from `jwks_uri`),
//!    `iss`, `aud` and `exp`; the user is the JWT's `user_claim`. The answer
//!    carries an access token, an ID token with the `sts:identity_context`
//!    claim, and the same context in `awsAdditionalDetails.identityContext`.
//! 2. `AssumeRole` of the configured role, signed with the operator's key,
//!    with `ProvidedContexts.member.1` = the Identity Center provider and
//!    that context, returns session credentials bound to the user.
//! 3. A Q Business request signed with those credentials speaks for that
//!    user (see `sigv4::Signer::Session`): its conversations are the user's.
//!
//! Where the documentation is silent (the identity context's format, the
//! exact error texts, which STS error a foreign context gets) the emulator
//! chooses: the context is opaque and only valid at this emulator; a foreign
//! or unknown one is `InvalidParameterValue`.

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use axum::body::Bytes;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use jsonwebtoken::jwk::JwkSet;
use rand::distr::{Alphanumeric, SampleString};
use serde::Deserialize;
use serde_json::{Value, json};

use super::Inner;
use super::errors::ApiError;
use super::sigv4::SessionKey;

/// The signing name of the SSO OIDC service.
pub(super) const SSO_OIDC_SERVICE: &str = "sso-oauth";
/// The signing name of STS.
pub(super) const STS_SERVICE: &str = "sts";
/// The grant of a trusted token issuer's JWT.
pub const JWT_BEARER_GRANT: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";
/// `ProvidedContexts[].ProviderArn` of an Identity Center identity context.
pub const IDENTITY_CENTER_PROVIDER: &str = "arn:aws:iam::aws:contextProvider/IdentityCenter";
/// How long an Identity Center token lives (`expiresIn`).
const TOKEN_LIFETIME: Duration = Duration::from_secs(3600);
/// STS's documented bounds of `DurationSeconds` (the role's maximum may be lower).
const MIN_SESSION: u64 = 900;
const MAX_SESSION: u64 = 43_200;

/// Identity Center as the emulator plays it: one customer managed
/// application that trusts one token issuer, and one role to assume.
#[derive(Clone, Debug)]
pub struct IdentityCenterConfig {
    /// The application's ARN: `CreateTokenWithIAM`'s `clientId`.
    pub application_arn: String,
    /// The role `AssumeRole` may assume with an identity context.
    pub role_arn: String,
    /// The trusted token issuer's `iss`.
    pub issuer: String,
    /// Where the issuer's keys are.
    pub jwks_uri: String,
    /// The `aud` the application accepts from that issuer.
    pub audience: String,
    /// The claim that names the Identity Center user (`sub`, `email`, ...).
    pub user_claim: String,
}

/// What Identity Center and STS remember between calls.
#[derive(Debug, Default)]
pub(super) struct IdentityState {
    /// Identity context → the user it names.
    contexts: HashMap<String, String>,
    /// Session access key → its credentials and user.
    sessions: HashMap<String, SessionKey>,
}

impl IdentityState {
    pub(super) fn session(&self, access_key_id: &str) -> Option<SessionKey> {
        self.sessions.get(access_key_id).cloned()
    }

    pub(super) fn issued(&self) -> Vec<IssuedSession> {
        self.sessions
            .iter()
            .map(|(key, s)| IssuedSession {
                access_key_id: key.clone(),
                secret_access_key: s.secret_access_key.clone(),
                session_token: s.session_token.clone(),
                user: s.user.clone(),
            })
            .collect()
    }
}

/// Session credentials STS issued, as [`super::QBusinessSim::issued_sessions`]
/// shows them to a test that searches for leaks.
#[derive(Clone)]
pub struct IssuedSession {
    pub access_key_id: String,
    pub secret_access_key: String,
    pub session_token: String,
    /// The Identity Center user it speaks for.
    pub user: String,
}

impl std::fmt::Debug for IssuedSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IssuedSession")
            .field("access_key_id", &self.access_key_id)
            .field("user", &self.user)
            .finish_non_exhaustive()
    }
}

fn random(len: usize) -> String {
    Alphanumeric.sample_string(&mut rand::rng(), len)
}

// ---- CreateTokenWithIAM (restJson1) ----

/// An SSO OIDC error: `x-amzn-ErrorType` and `{error, error_description}`.
fn oidc_error(status: StatusCode, shape: &'static str, error: &str, description: &str) -> Response {
    let mut response = (
        status,
        json!({"error": error, "error_description": description}).to_string(),
    )
        .into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers.insert("x-amzn-ErrorType", HeaderValue::from_static(shape));
    response
}

fn invalid_grant(description: &str) -> Response {
    oidc_error(
        StatusCode::BAD_REQUEST,
        "InvalidGrantException",
        "invalid_grant",
        description,
    )
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CreateTokenWithIam {
    client_id: Option<String>,
    grant_type: Option<String>,
    assertion: Option<String>,
}

/// `POST /token?aws_iam=t`.
pub(super) async fn create_token_with_iam(
    sim: &Inner,
    raw_query: Option<&str>,
    body: &Bytes,
) -> Response {
    if raw_query != Some("aws_iam=t") {
        return ApiError::no_such_operation().into_response();
    }
    let Some(center) = &sim.config.identity_center else {
        return oidc_error(
            StatusCode::BAD_REQUEST,
            "InvalidClientException",
            "invalid_client",
            "No application of this instance trusts a token issuer.",
        );
    };
    let Ok(input) = serde_json::from_slice::<CreateTokenWithIam>(body) else {
        return oidc_error(
            StatusCode::BAD_REQUEST,
            "InvalidRequestException",
            "invalid_request",
            "The request body is not a CreateTokenWithIAM input.",
        );
    };
    if input.client_id.as_deref() != Some(center.application_arn.as_str()) {
        return oidc_error(
            StatusCode::UNAUTHORIZED,
            "InvalidClientException",
            "invalid_client",
            "The clientId is not the ARN of an application of this instance.",
        );
    }
    if input.grant_type.as_deref() != Some(JWT_BEARER_GRANT) {
        return oidc_error(
            StatusCode::BAD_REQUEST,
            "UnsupportedGrantTypeException",
            "unsupported_grant_type",
            "This application accepts only the JWT bearer grant.",
        );
    }
    let Some(assertion) = input.assertion.filter(|a| !a.is_empty()) else {
        return oidc_error(
            StatusCode::BAD_REQUEST,
            "InvalidRequestException",
            "invalid_request",
            "assertion is required for the JWT bearer grant.",
        );
    };
    let user = match check_assertion(center, &assertion).await {
        Ok(user) => user,
        Err(why) => {
            sim.state().stats.token_exchanges_refused += 1;
            return invalid_grant(&why);
        }
    };
    let context = format!("idc-ctx-{}", random(40));
    {
        let mut st = sim.state();
        st.identity.contexts.insert(context.clone(), user.clone());
        st.stats.token_exchanges += 1;
    }
    let id_token = unsigned_id_token(&json!({
        "iss": "https://identitycenter.amazonaws.com/ssoins-emulated",
        "sub": user,
        "aud": center.application_arn,
        "sts:identity_context": context,
    }));
    axum::Json(json!({
        "accessToken": format!("aoa{}", random(60)),
        "tokenType": "Bearer",
        "expiresIn": TOKEN_LIFETIME.as_secs(),
        "idToken": id_token,
        "issuedTokenType": "urn:ietf:params:oauth:token-type:access_token",
        "scope": ["sts:identity_context"],
        "awsAdditionalDetails": {"identityContext": context},
    }))
    .into_response()
}

/// An ID token's shape (the emulator does not sign it: only AWS reads it).
fn unsigned_id_token(claims: &Value) -> String {
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    format!(
        "{}.{}.",
        b64.encode(r#"{"alg":"none","typ":"JWT"}"#),
        b64.encode(claims.to_string())
    )
}

/// The user a trusted token issuer's JWT names, or why it is refused.
async fn check_assertion(center: &IdentityCenterConfig, jwt: &str) -> Result<String, String> {
    let header = jsonwebtoken::decode_header(jwt).map_err(|e| format!("not a JWT: {e}"))?;
    let keys = fetch_keys(&center.jwks_uri).await?;
    let jwk = match header.kid.as_deref() {
        Some(kid) => keys.find(kid),
        None => keys.keys.first(),
    }
    .ok_or("the token's key is not in the issuer's JWKS")?;
    let key = jsonwebtoken::DecodingKey::from_jwk(jwk).map_err(|e| format!("unusable key: {e}"))?;
    let mut validation = jsonwebtoken::Validation::new(header.alg);
    validation.set_issuer(&[&center.issuer]);
    validation.set_audience(&[&center.audience]);
    validation.set_required_spec_claims(&["exp", "iss", "aud"]);
    let claims = jsonwebtoken::decode::<serde_json::Map<String, Value>>(jwt, &key, &validation)
        .map_err(|e| format!("the token is not valid for this application: {e}"))?
        .claims;
    claims
        .get(&center.user_claim)
        .and_then(Value::as_str)
        .filter(|u| !u.is_empty())
        .map(str::to_owned)
        .ok_or_else(|| {
            format!(
                "the token has no `{}` claim to name a user",
                center.user_claim
            )
        })
}

/// A JWK set holds a few keys; anything larger is not one, and the emulator
/// does not buffer it.
const MAX_JWKS_BYTES: usize = 256 * 1024;

async fn fetch_keys(jwks_uri: &str) -> Result<JwkSet, String> {
    let mut response = reqwest::Client::new()
        .get(jwks_uri)
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .map_err(|e| format!("the issuer's JWKS could not be fetched: {e}"))?;
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| format!("the issuer's JWKS could not be read: {e}"))?
    {
        if body.len() + chunk.len() > MAX_JWKS_BYTES {
            return Err(format!(
                "the issuer's JWKS is larger than {MAX_JWKS_BYTES} bytes"
            ));
        }
        body.extend_from_slice(&chunk);
    }
    serde_json::from_slice::<JwkSet>(&body)
        .map_err(|e| format!("the issuer's JWKS is not a JWK set: {e}"))
}

// ---- AssumeRole (awsQuery) ----

const STS_NAMESPACE: &str = "https://sts.amazonaws.com/doc/2011-06-15/";

/// An STS error document.
pub(super) fn sts_error(status: StatusCode, code: &str, message: &str) -> Response {
    let body = format!(
        "<ErrorResponse xmlns=\"{STS_NAMESPACE}\"><Error><Type>Sender</Type><Code>{}</Code>\
         <Message>{}</Message></Error><RequestId>{}</RequestId></ErrorResponse>",
        xml_escape(code),
        xml_escape(message),
        super::ids::new_uuid()
    );
    xml(status, body)
}

/// An awsQuery answer: XML.
fn xml(status: StatusCode, body: String) -> Response {
    let mut response = (status, body).into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/xml"));
    response
}

/// STS's name (awsQuery) for a front-door refusal named as a JSON service
/// names it: the same failures, other codes.
pub(super) fn sts_code(code: &str) -> &str {
    match code {
        "InvalidSignatureException" => "SignatureDoesNotMatch",
        "UnrecognizedClientException" => "InvalidClientTokenId",
        "IncompleteSignatureException" => "IncompleteSignature",
        "MissingAuthenticationTokenException" => "MissingAuthenticationToken",
        "ExpiredTokenException" => "ExpiredToken",
        other => other,
    }
}

fn xml_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn validation(message: &str) -> Response {
    sts_error(StatusCode::BAD_REQUEST, "ValidationError", message)
}

/// `POST /` with a form body: `AssumeRole`, the one STS action served.
pub(super) fn sts(sim: &Inner, body: &Bytes) -> Response {
    let form: HashMap<String, String> = form_urlencoded::parse(body).into_owned().collect();
    let get = |key: &str| form.get(key).map(String::as_str);
    if get("Version") != Some("2011-06-15") {
        return sts_error(
            StatusCode::BAD_REQUEST,
            "InvalidAction",
            "Only Version 2011-06-15 is emulated.",
        );
    }
    match get("Action") {
        Some("AssumeRole") => {}
        Some("GetCallerIdentity") => return caller_identity(),
        _ => {
            return sts_error(
                StatusCode::BAD_REQUEST,
                "InvalidAction",
                "Only AssumeRole and GetCallerIdentity are emulated.",
            );
        }
    }
    let Some(center) = &sim.config.identity_center else {
        return sts_error(
            StatusCode::FORBIDDEN,
            "AccessDenied",
            "No role may be assumed here.",
        );
    };
    let Some(role) = get("RoleArn") else {
        return validation(
            "1 validation error detected: Value null at 'roleArn' failed to satisfy constraint: Member must not be null",
        );
    };
    let Some(session_name) = get("RoleSessionName").filter(|n| valid_session_name(n)) else {
        return validation(
            "1 validation error detected: Value at 'roleSessionName' failed to satisfy \
             constraint: Member must have length between 2 and 64 and satisfy regular \
             expression pattern: [\\w+=,.@-]*",
        );
    };
    let duration = match get("DurationSeconds").map(str::parse::<u64>) {
        None => 3600,
        Some(Ok(d)) if (MIN_SESSION..=MAX_SESSION).contains(&d) => d,
        Some(_) => {
            return validation(
                "1 validation error detected: Value at 'durationSeconds' failed to satisfy \
                 constraint: Member must have value between 900 and 43200",
            );
        }
    };
    if role != center.role_arn {
        return sts_error(
            StatusCode::FORBIDDEN,
            "AccessDenied",
            &format!("User is not authorized to perform: sts:AssumeRole on resource: {role}"),
        );
    }
    let provider = get("ProvidedContexts.member.1.ProviderArn");
    let assertion = get("ProvidedContexts.member.1.ContextAssertion");
    let (Some(IDENTITY_CENTER_PROVIDER), Some(assertion)) = (provider, assertion) else {
        return sts_error(
            StatusCode::FORBIDDEN,
            "AccessDenied",
            "This role's trust policy allows sts:AssumeRole only with an IAM Identity Center \
             identity context (sts:SetContext).",
        );
    };
    let mut st = sim.state();
    let Some(user) = st.identity.contexts.get(assertion).cloned() else {
        return sts_error(
            StatusCode::BAD_REQUEST,
            "InvalidParameterValue",
            "The ContextAssertion is not a valid identity context.",
        );
    };
    let access_key_id = format!("ASIA{}", random(16).to_uppercase());
    let session = SessionKey {
        secret_access_key: random(40),
        session_token: random(120),
        expires_at: SystemTime::now() + Duration::from_secs(duration),
        user: user.clone(),
    };
    let expiration = chrono::DateTime::<chrono::Utc>::from(session.expires_at)
        .format("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    let body = format!(
        "<AssumeRoleResponse xmlns=\"{STS_NAMESPACE}\"><AssumeRoleResult>\
         <AssumedRoleUser><AssumedRoleId>AROAEMULATEDROLE0001:{name}</AssumedRoleId>\
         <Arn>{arn}/{name}</Arn></AssumedRoleUser>\
         <Credentials><AccessKeyId>{access_key_id}</AccessKeyId>\
         <SecretAccessKey>{secret}</SecretAccessKey><SessionToken>{token}</SessionToken>\
         <Expiration>{expiration}</Expiration></Credentials>\
         <SourceIdentity>{user}</SourceIdentity>\
         </AssumeRoleResult><ResponseMetadata><RequestId>{request}</RequestId>\
         </ResponseMetadata></AssumeRoleResponse>",
        name = xml_escape(session_name),
        arn = xml_escape(&assumed_role_arn(role)),
        secret = session.secret_access_key,
        token = session.session_token,
        user = xml_escape(&user),
        request = super::ids::new_uuid(),
    );
    st.identity.sessions.insert(access_key_id, session);
    st.stats.roles_assumed += 1;
    xml(StatusCode::OK, body)
}

/// The operator's key's identity (the only key `GetCallerIdentity` is
/// signed with here: a session's is refused at the front door).
fn caller_identity() -> Response {
    let body = format!(
        "<GetCallerIdentityResponse xmlns=\"{STS_NAMESPACE}\"><GetCallerIdentityResult>\
         <Arn>{OPERATOR_ARN}</Arn><UserId>AIDAEMULATEDUSER0001</UserId>\
         <Account>111122223333</Account></GetCallerIdentityResult>\
         <ResponseMetadata><RequestId>{}</RequestId></ResponseMetadata>\
         </GetCallerIdentityResponse>",
        super::ids::new_uuid()
    );
    xml(StatusCode::OK, body)
}

/// Who the operator's access key is, as `GetCallerIdentity` says.
pub const OPERATOR_ARN: &str = "arn:aws:iam::111122223333:user/agentgate-sim";

/// `arn:aws:iam::123:role/Name` → `arn:aws:sts::123:assumed-role/Name`.
fn assumed_role_arn(role: &str) -> String {
    let mut parts = role.splitn(6, ':');
    let (Some(_), Some(partition), Some(_), Some(_), Some(account), Some(resource)) = (
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
    ) else {
        return format!("arn:aws:sts::000000000000:assumed-role/{role}");
    };
    let name = resource.rsplit('/').next().unwrap_or(resource);
    format!("arn:{partition}:sts::{account}:assumed-role/{name}")
}

fn valid_session_name(name: &str) -> bool {
    (2..=64).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_+=,.@-".contains(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Serves `body` at `/jwks` on a loopback port; returns its URL.
    async fn serve_jwks(body: String) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let url = format!("http://{}/jwks", listener.local_addr().expect("addr"));
        let app = axum::Router::new().route("/jwks", axum::routing::get(move || async { body }));
        tokio::spawn(async move { axum::serve(listener, app).await });
        url
    }

    #[tokio::test]
    async fn a_jwks_larger_than_the_cap_is_refused_unread() {
        let url = serve_jwks(format!("{{\"keys\":[\"{}\"]}}", "k".repeat(MAX_JWKS_BYTES))).await;
        let error = fetch_keys(&url).await.expect_err("too large");
        assert!(error.contains("larger than 262144 bytes"), "{error}");
    }

    #[tokio::test]
    async fn a_jwks_within_the_cap_is_read() {
        let url = serve_jwks(r#"{"keys":[]}"#.to_owned()).await;
        let keys = fetch_keys(&url).await.expect("a JWK set");
        assert!(keys.keys.is_empty());
    }

    #[test]
    fn session_names_follow_the_model() {
        assert!(valid_session_name("agentgate-0123abcd"));
        assert!(!valid_session_name("a"));
        assert!(!valid_session_name("has space"));
        assert!(!valid_session_name(&"x".repeat(65)));
    }

    #[test]
    fn an_assumed_role_arn_names_the_role() {
        assert_eq!(
            assumed_role_arn("arn:aws:iam::111122223333:role/path/QBusinessUsers"),
            "arn:aws:sts::111122223333:assumed-role/QBusinessUsers"
        );
    }

    #[test]
    fn sts_errors_escape_their_text() {
        let body = format!("{:?}", xml_escape("<a & \"b\">"));
        assert!(body.contains("&lt;a &amp; &quot;b&quot;&gt;"), "{body}");
    }
}
