//! SigV4 verification of incoming requests, with the official `aws-sigv4` signer.
//!
//! The emulator recomputes the signature from what it received: the method, the URI
//! path and query exactly as sent (already percent-encoded once by the SDK; the signer
//! encodes it again, matching the SDK's `double_uri_encode`), exactly the headers named in
//! `SignedHeaders`, the `X-Amz-Date` time and the body bytes. Settings mirror how the Rust
//! SDK signs Q Business: double URI encoding, normalized path, no
//! `x-amz-content-sha256` header, and an `x-amz-security-token` header included in the
//! canonical request when the caller has a session token. Two kinds of keys verify: the
//! operator's long-term key (no token needed) and a session key the emulator's STS
//! issued, whose token must arrive with it and which expires (`ExpiredTokenException`).
//!
//! The checks run in the front door's order, and fail with its shapes (all HTTP 403):
//! no `Authorization` → `MissingAuthenticationTokenException`; malformed header →
//! `IncompleteSignatureException`; unknown access key → `UnrecognizedClientException`;
//! credential scope with another date, region or service, a clock more than 15 minutes
//! off, or a different signature → `InvalidSignatureException`.

use std::time::{Duration, SystemTime};

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
use aws_sigv4::sign::v4;
use aws_smithy_runtime_api::client::identity::Identity;
use axum::http::{HeaderMap, header};
use chrono::{DateTime, NaiveDateTime, Utc};

use super::errors::ApiError;

/// The signing name of Amazon Q Business.
pub(super) const SERVICE: &str = "qbusiness";
/// How far `X-Amz-Date` may be from the server's clock.
pub(super) const MAX_SKEW: Duration = Duration::from_secs(15 * 60);
const ALGORITHM: &str = "AWS4-HMAC-SHA256";
const DATE_FORMAT: &str = "%Y%m%dT%H%M%SZ";

/// The operator's long-term credentials the emulator accepts, beside the
/// session credentials it issued (see [`SessionKey`]). `Debug` redacts the secret.
#[derive(Clone)]
pub(super) struct Verifier {
    /// Accepted access key id.
    pub access_key_id: String,
    /// Its secret.
    pub secret_access_key: String,
    /// The region the credential scope must name.
    pub region: String,
}

impl std::fmt::Debug for Verifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Verifier")
            .field("access_key_id", &self.access_key_id)
            .field("secret_access_key", &"<redacted>")
            .field("region", &self.region)
            .finish()
    }
}

/// Temporary credentials the emulator's STS issued: a request signed with
/// their access key must carry their session token and be made before they
/// expire. `Debug` redacts the secret and the token.
#[derive(Clone)]
pub(super) struct SessionKey {
    pub secret_access_key: String,
    pub session_token: String,
    pub expires_at: SystemTime,
    /// The Identity Center user the session speaks for.
    pub user: String,
}

impl std::fmt::Debug for SessionKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionKey")
            .field("user", &self.user)
            .field("expires_at", &self.expires_at)
            .finish_non_exhaustive()
    }
}

/// Who signed a request that verified.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Signer {
    /// The operator's long-term access key.
    Operator,
    /// An identity-enhanced role session, for this Identity Center user.
    Session { user: String },
}

/// The parts of a request that the signature covers.
#[derive(Clone, Copy, Debug)]
pub(super) struct Received<'a> {
    /// HTTP method, e.g. `POST`.
    pub method: &'a str,
    /// The path and query exactly as received, e.g. `/applications/x/conversations?sync`.
    pub path_and_query: &'a str,
    /// The `:authority` of an HTTP/2 request, used when there is no `Host` header.
    pub authority: Option<&'a str>,
    /// All request headers.
    pub headers: &'a HeaderMap,
    /// The body bytes.
    pub body: &'a [u8],
}

/// A parsed `Authorization: AWS4-HMAC-SHA256 Credential=..., SignedHeaders=..., Signature=...`.
#[derive(Debug)]
struct Authorization<'a> {
    access_key_id: &'a str,
    scope_date: &'a str,
    scope_region: &'a str,
    scope_service: &'a str,
    scope_terminator: &'a str,
    signed_headers: Vec<&'a str>,
    signature: &'a str,
}

fn parse_authorization(value: &str) -> Result<Authorization<'_>, ApiError> {
    let (algorithm, rest) = value.split_once(' ').unwrap_or((value, ""));
    if algorithm != ALGORITHM {
        return Err(ApiError::incomplete_signature(format!(
            "Unsupported AWS 'algorithm': '{algorithm}'"
        )));
    }
    let mut credential = None;
    let mut signed_headers = None;
    let mut signature = None;
    for part in rest.split(',') {
        let part = part.trim();
        if let Some(v) = part.strip_prefix("Credential=") {
            credential = Some(v);
        } else if let Some(v) = part.strip_prefix("SignedHeaders=") {
            signed_headers = Some(v);
        } else if let Some(v) = part.strip_prefix("Signature=") {
            signature = Some(v);
        }
    }
    let missing = |name: &str| {
        ApiError::incomplete_signature(format!(
            "Authorization header requires '{name}' parameter. Authorization={value}"
        ))
    };
    let credential = credential.ok_or_else(|| missing("Credential"))?;
    let signed_headers = signed_headers.ok_or_else(|| missing("SignedHeaders"))?;
    let signature = signature.ok_or_else(|| missing("Signature"))?;
    let scope: Vec<&str> = credential.split('/').collect();
    let [access_key_id, date, region, service, terminator] = scope[..] else {
        return Err(ApiError::incomplete_signature(format!(
            "Credential must have exactly 5 slash-delimited elements, e.g. \
             keyid/date/region/service/term, got '{credential}'"
        )));
    };
    Ok(Authorization {
        access_key_id,
        scope_date: date,
        scope_region: region,
        scope_service: service,
        scope_terminator: terminator,
        signed_headers: signed_headers.split(';').collect(),
        signature,
    })
}

fn format_time(t: DateTime<Utc>) -> String {
    t.format(DATE_FORMAT).to_string()
}

impl Verifier {
    /// Verifies the request's SigV4 signature at time `now`, scoped to
    /// `service` (its signing name); `sessions` looks up the temporary
    /// credentials issued by the emulator's STS by access key.
    pub(super) fn verify(
        &self,
        request: &Received<'_>,
        now: SystemTime,
        service: &str,
        sessions: &dyn Fn(&str) -> Option<SessionKey>,
    ) -> Result<Signer, ApiError> {
        let headers = request.headers;
        let Some(authorization) = headers.get(header::AUTHORIZATION) else {
            return Err(ApiError::missing_authentication_token());
        };
        let authorization = authorization
            .to_str()
            .map_err(|_| ApiError::incomplete_signature("Authorization header is not ASCII."))?;
        let auth = parse_authorization(authorization)?;

        let amz_date = headers
            .get("x-amz-date")
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| {
                ApiError::incomplete_signature(
                    "Authorization header requires existence of either a 'X-Amz-Date' or a \
                     'Date' header.",
                )
            })?;
        let signed_at = NaiveDateTime::parse_from_str(amz_date, DATE_FORMAT)
            .map_err(|_| {
                ApiError::incomplete_signature(format!(
                    "Date must be in ISO-8601 'basic format'. Got '{amz_date}'."
                ))
            })?
            .and_utc();
        for required in ["host", "x-amz-date"] {
            if !auth.signed_headers.contains(&required) {
                return Err(ApiError::incomplete_signature(format!(
                    "'{required}' must be a 'SignedHeader' in the AWS Authorization."
                )));
            }
        }

        let (secret, signer) = if auth.access_key_id == self.access_key_id {
            (self.secret_access_key.clone(), Signer::Operator)
        } else if let Some(session) = sessions(auth.access_key_id) {
            let token = headers
                .get("x-amz-security-token")
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default();
            if !constant_time_eq(token.as_bytes(), session.session_token.as_bytes()) {
                return Err(ApiError::unrecognized_client());
            }
            if now >= session.expires_at {
                return Err(ApiError::expired_token());
            }
            (
                session.secret_access_key,
                Signer::Session { user: session.user },
            )
        } else {
            return Err(ApiError::unrecognized_client());
        };
        let date = &amz_date[..8];
        if auth.scope_date != date {
            return Err(ApiError::invalid_signature(format!(
                "Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date \
                 from HTTP: '{}' != '{date}', from 'X-Amz-Date'.",
                auth.scope_date
            )));
        }
        if auth.scope_region != self.region {
            return Err(ApiError::invalid_signature(format!(
                "Credential should be scoped to a valid region, not '{}'. ",
                auth.scope_region
            )));
        }
        if auth.scope_service != service {
            return Err(ApiError::invalid_signature(format!(
                "Credential should be scoped to correct service: '{service}'. "
            )));
        }
        if auth.scope_terminator != "aws4_request" {
            return Err(ApiError::invalid_signature(
                "Credential should be scoped with a valid terminator: 'aws4_request', not \
                 something else. ",
            ));
        }

        let now_utc: DateTime<Utc> = now.into();
        let skew = chrono::Duration::from_std(MAX_SKEW).unwrap_or_default();
        if signed_at < now_utc - skew {
            return Err(ApiError::invalid_signature(format!(
                "Signature expired: {} is now earlier than {} ({} - 15 min.)",
                amz_date,
                format_time(now_utc - skew),
                format_time(now_utc)
            )));
        }
        if signed_at > now_utc + skew {
            return Err(ApiError::invalid_signature(format!(
                "Signature not yet current: {} is still later than {} ({} + 15 min.)",
                amz_date,
                format_time(now_utc + skew),
                format_time(now_utc)
            )));
        }

        let expected =
            self.compute_signature(request, &auth, &secret, service, signed_at.into())?;
        if !constant_time_eq(expected.as_bytes(), auth.signature.as_bytes()) {
            return Err(ApiError::signature_mismatch());
        }
        Ok(signer)
    }

    fn compute_signature(
        &self,
        request: &Received<'_>,
        auth: &Authorization<'_>,
        secret: &str,
        service: &str,
        time: SystemTime,
    ) -> Result<String, ApiError> {
        let headers = request.headers;
        let token = headers
            .get("x-amz-security-token")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let identity: Identity =
            Credentials::new(auth.access_key_id, secret, token, None, "agentgate-sim").into();

        // Sign exactly the headers the client listed. The signer adds `x-amz-date` (from
        // `time`) and `x-amz-security-token` (from the identity) itself.
        let mut settings = SigningSettings::default();
        settings.excluded_headers = None;

        let host = headers
            .get(header::HOST)
            .and_then(|v| v.to_str().ok())
            .or(request.authority)
            .ok_or_else(ApiError::signature_mismatch)?;
        let mut signed: Vec<(&str, &str)> = vec![("host", host)];
        for name in &auth.signed_headers {
            if matches!(*name, "host" | "x-amz-date" | "x-amz-security-token") {
                continue;
            }
            let values = headers.get_all(*name);
            let mut any = false;
            for value in values {
                let value = value.to_str().map_err(|_| ApiError::signature_mismatch())?;
                signed.push((name, value));
                any = true;
            }
            if !any {
                // A signed header that did not arrive cannot reproduce the signature.
                return Err(ApiError::signature_mismatch());
            }
        }

        let params = v4::SigningParams::builder()
            .identity(&identity)
            .region(&self.region)
            .name(service)
            .time(time)
            .settings(settings)
            .build()
            .map_err(|e| ApiError::internal(format!("signing parameters: {e}")))?
            .into();
        let signable = SignableRequest::new(
            request.method,
            request.path_and_query,
            signed.into_iter(),
            SignableBody::Bytes(request.body),
        )
        .map_err(|_| ApiError::signature_mismatch())?;
        let output = sign(signable, &params).map_err(|_| ApiError::signature_mismatch())?;
        Ok(output.signature().to_owned())
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    const BODY: &[u8] = br#"{"clientToken":"t-1","userMessage":"How many vacation days?"}"#;
    const PATH: &str = "/applications/0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d/conversations?sync&userId=alice%40example.com";

    fn verifier() -> Verifier {
        Verifier {
            access_key_id: "AKIDTEST".into(),
            secret_access_key: "SECRETTEST".into(),
            region: "us-east-1".into(),
        }
    }

    /// Signs like the SDK does (default settings: double encode, normalized path, no
    /// content-sha256 header) and returns the headers as they would arrive.
    fn signed_headers(
        secret: &str,
        region: &str,
        service: &str,
        time: SystemTime,
        token: Option<&str>,
        body: &[u8],
    ) -> HeaderMap {
        let identity: Identity =
            Credentials::new("AKIDTEST", secret, token.map(str::to_owned), None, "test").into();
        let params = v4::SigningParams::builder()
            .identity(&identity)
            .region(region)
            .name(service)
            .time(time)
            .settings(SigningSettings::default())
            .build()
            .expect("params")
            .into();
        let base = [
            ("content-type", "application/json"),
            ("content-length", "62"),
            ("x-amz-user-agent", "aws-sdk-rust/1.3 api/qbusiness/1.136.0"),
            ("user-agent", "aws-sdk-rust/1.3 os/linux lang/rust/1.95.0"),
        ];
        let url = format!("http://127.0.0.1:8731{PATH}");
        let signable =
            SignableRequest::new("POST", url, base.into_iter(), SignableBody::Bytes(body))
                .expect("signable");
        let (instructions, _sig) = sign(signable, &params).expect("sign").into_parts();
        let mut headers = HeaderMap::new();
        headers.insert("host", HeaderValue::from_static("127.0.0.1:8731"));
        for (k, v) in base {
            headers.insert(k, HeaderValue::from_static(v));
        }
        for (k, v) in instructions.headers() {
            headers.insert(
                axum::http::HeaderName::from_bytes(k.as_bytes()).expect("name"),
                HeaderValue::from_str(v).expect("value"),
            );
        }
        headers
    }

    fn received<'a>(headers: &'a HeaderMap, body: &'a [u8]) -> Received<'a> {
        Received {
            method: "POST",
            path_and_query: PATH,
            authority: None,
            headers,
            body,
        }
    }

    fn code(result: Result<Signer, ApiError>) -> &'static str {
        match result {
            Ok(_) => "ok",
            Err(e) => e.code(),
        }
    }

    #[test]
    fn accepts_a_request_signed_like_the_sdk() {
        let now = SystemTime::now();
        let headers = signed_headers("SECRETTEST", "us-east-1", "qbusiness", now, None, BODY);
        let result = verifier().verify(&received(&headers, BODY), now, SERVICE, &|_| None);
        assert_eq!(result.expect("verified"), Signer::Operator);
    }

    #[test]
    fn accepts_a_session_token() {
        let now = SystemTime::now();
        let headers = signed_headers(
            "SECRETTEST",
            "us-east-1",
            "qbusiness",
            now,
            Some("tok"),
            BODY,
        );
        assert!(headers.contains_key("x-amz-security-token"));
        assert_eq!(
            code(verifier().verify(&received(&headers, BODY), now, SERVICE, &|_| None)),
            "ok"
        );
    }

    #[test]
    fn an_issued_session_key_speaks_for_its_user_until_it_expires() {
        let now = SystemTime::now();
        // The operator's key is another: "AKIDTEST" is a session key here.
        let operator = Verifier {
            access_key_id: "AKIDOPERATOR".into(),
            ..verifier()
        };
        let session = |expires_at| {
            move |key: &str| {
                (key == "AKIDTEST").then(|| SessionKey {
                    secret_access_key: "SECRETTEST".into(),
                    session_token: "tok".into(),
                    expires_at,
                    user: "alice@corp.example".into(),
                })
            }
        };
        let later = now + Duration::from_secs(900);
        let headers = signed_headers("SECRETTEST", "us-east-1", SERVICE, now, Some("tok"), BODY);
        assert_eq!(
            operator
                .verify(&received(&headers, BODY), now, SERVICE, &session(later))
                .expect("verified"),
            Signer::Session {
                user: "alice@corp.example".into()
            }
        );
        let wrong = signed_headers("SECRETTEST", "us-east-1", SERVICE, now, Some("other"), BODY);
        assert_eq!(
            code(operator.verify(&received(&wrong, BODY), now, SERVICE, &session(later))),
            "UnrecognizedClientException"
        );
        let none = signed_headers("SECRETTEST", "us-east-1", SERVICE, now, None, BODY);
        assert_eq!(
            code(operator.verify(&received(&none, BODY), now, SERVICE, &session(later))),
            "UnrecognizedClientException"
        );
        assert_eq!(
            code(operator.verify(&received(&headers, BODY), now, SERVICE, &session(now))),
            "ExpiredTokenException"
        );
    }

    #[test]
    fn rejects_a_wrong_secret() {
        let now = SystemTime::now();
        let headers = signed_headers("WRONG", "us-east-1", "qbusiness", now, None, BODY);
        let err = verifier()
            .verify(&received(&headers, BODY), now, SERVICE, &|_| None)
            .expect_err("must fail");
        assert_eq!(err.code(), "InvalidSignatureException");
        assert!(
            err.message()
                .starts_with("The request signature we calculated")
        );
    }

    #[test]
    fn rejects_a_tampered_body() {
        let now = SystemTime::now();
        let headers = signed_headers("SECRETTEST", "us-east-1", "qbusiness", now, None, BODY);
        let tampered = br#"{"clientToken":"t-1","userMessage":"How many vacation days!"}"#;
        assert_eq!(
            code(verifier().verify(&received(&headers, tampered), now, SERVICE, &|_| None)),
            "InvalidSignatureException"
        );
    }

    #[test]
    fn rejects_a_tampered_query() {
        let now = SystemTime::now();
        let headers = signed_headers("SECRETTEST", "us-east-1", "qbusiness", now, None, BODY);
        let mut request = received(&headers, BODY);
        let other = PATH.replace("alice", "mallory");
        request.path_and_query = &other;
        assert_eq!(
            code(verifier().verify(&request, now, SERVICE, &|_| None)),
            "InvalidSignatureException"
        );
    }

    #[test]
    fn rejects_an_unknown_access_key() {
        let now = SystemTime::now();
        let headers = signed_headers("SECRETTEST", "us-east-1", "qbusiness", now, None, BODY);
        let mut other = verifier();
        other.access_key_id = "AKIDOTHER".into();
        assert_eq!(
            code(other.verify(&received(&headers, BODY), now, SERVICE, &|_| None)),
            "UnrecognizedClientException"
        );
    }

    #[test]
    fn rejects_wrong_region_and_service() {
        let now = SystemTime::now();
        let headers = signed_headers("SECRETTEST", "eu-west-1", "qbusiness", now, None, BODY);
        let err = verifier()
            .verify(&received(&headers, BODY), now, SERVICE, &|_| None)
            .expect_err("region");
        assert_eq!(err.code(), "InvalidSignatureException");
        assert!(err.message().contains("region"));
        let headers = signed_headers("SECRETTEST", "us-east-1", "kendra", now, None, BODY);
        let err = verifier()
            .verify(&received(&headers, BODY), now, SERVICE, &|_| None)
            .expect_err("service");
        assert_eq!(err.code(), "InvalidSignatureException");
        assert!(err.message().contains("qbusiness"));
    }

    #[test]
    fn rejects_a_clock_more_than_15_minutes_off() {
        let now = SystemTime::now();
        let signed = now - Duration::from_secs(16 * 60);
        let headers = signed_headers("SECRETTEST", "us-east-1", "qbusiness", signed, None, BODY);
        let err = verifier()
            .verify(&received(&headers, BODY), now, SERVICE, &|_| None)
            .expect_err("expired");
        assert_eq!(err.code(), "InvalidSignatureException");
        assert!(
            err.message().starts_with("Signature expired: "),
            "{}",
            err.message()
        );

        let signed = now + Duration::from_secs(16 * 60);
        let headers = signed_headers("SECRETTEST", "us-east-1", "qbusiness", signed, None, BODY);
        assert_eq!(
            code(verifier().verify(&received(&headers, BODY), now, SERVICE, &|_| None)),
            "InvalidSignatureException"
        );

        let signed = now - Duration::from_secs(14 * 60);
        let headers = signed_headers("SECRETTEST", "us-east-1", "qbusiness", signed, None, BODY);
        assert_eq!(
            code(verifier().verify(&received(&headers, BODY), now, SERVICE, &|_| None)),
            "ok"
        );
    }

    #[test]
    fn missing_or_malformed_authorization() {
        let now = SystemTime::now();
        let empty = HeaderMap::new();
        assert_eq!(
            code(verifier().verify(&received(&empty, BODY), now, SERVICE, &|_| None)),
            "MissingAuthenticationTokenException"
        );
        let mut basic = HeaderMap::new();
        basic.insert(
            "authorization",
            HeaderValue::from_static("Basic YWxhZGRpbjpvcGVu"),
        );
        assert_eq!(
            code(verifier().verify(&received(&basic, BODY), now, SERVICE, &|_| None)),
            "IncompleteSignatureException"
        );
    }
}
