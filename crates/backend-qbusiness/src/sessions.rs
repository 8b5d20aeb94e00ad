//! Identity-aware sessions: Amazon Q Business answering as the MCP user,
//! with that user's document access, on a gateway whose principals sign in
//! with OAuth.
//!
//! AWS's way for a third-party app to call Q Business as one of its users
//! ("identity-aware sessions"): IAM Identity Center trusts the OAuth
//! issuer (a *trusted token issuer* on a customer managed application), the
//! app exchanges the user's access token for an identity context, and
//! assumes a role with that context; the role session then speaks for the
//! user. The flow, per principal:
//!
//! ```text
//! any request with an OAuth access token ─▶ Gateway::enter ─▶ Backend::principal_request
//!   ─▶ IdentitySessions::renew(owner, token)        only when no session, or it ends within 5 min
//!        SSO OIDC CreateTokenWithIAM   clientId = application_arn, grant jwt-bearer,
//!                                      assertion = the access token   (signed: the gateway's key)
//!        ─▶ identity context           awsAdditionalDetails.identityContext
//!                                      (else the ID token's `sts:identity_context` claim)
//!        STS AssumeRole                role_arn, ProvidedContexts = [IdentityCenter, context]
//!        ─▶ session credentials, kept in memory for this principal
//! ChatSync / ListMessages step ─▶ IdentitySessions::credentials(owner)
//!   ─▶ signed with them; no userId / userGroups (the session is the identity)
//! ```
//!
//! ```toml
//! [qbusiness.identity_center]
//! application_arn = "arn:aws:sso::111122223333:application/ssoins-1111/apl-2222"
//! role_arn = "arn:aws:iam::111122223333:role/QBusinessIdentityAware"
//! session_seconds = 3600   # 900 to 43200; the role's maximum may be lower
//! ```
//!
//! The access token is used for the exchange and dropped. Session
//! credentials live in this process only (never in the store): after a
//! restart, or on another instance, a step that finds none waits for the
//! principal's next request — a client polling its task is one — and is
//! retried. An exchange that AWS refused is remembered for
//! [`REFUSAL_BACKOFF`] so a principal's requests do not hammer Identity
//! Center, and its reason becomes the tool's error.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use agentgate_backend::{AccessToken, Owner, UpstreamMetrics};
use aws_credential_types::Credentials;
use aws_smithy_types::timeout::TimeoutConfig;
use base64::Engine as _;
use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::settings::Settings;

/// The grant of an external issuer's JWT at `CreateTokenWithIAM`.
pub const JWT_BEARER_GRANT: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";
/// `ProvidedContexts[].ProviderArn` of an Identity Center identity context.
pub const IDENTITY_CENTER_PROVIDER: &str = "arn:aws:iam::aws:contextProvider/IdentityCenter";
/// A session is renewed when a request arrives less than this before it ends.
pub const RENEW_BEFORE: Duration = Duration::from_secs(5 * 60);
/// How long a refused exchange is not tried again for the same principal.
pub const REFUSAL_BACKOFF: Duration = Duration::from_secs(30);
/// The longest an exchange (both calls, the SDK's retries included) may take.
const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(20);
/// At most this many principals are remembered; past it, ended sessions
/// and old refusals are dropped first.
const MAX_PRINCIPALS: usize = 100_000;

/// `[qbusiness.identity_center]`: how a principal's OAuth access token
/// becomes AWS credentials that speak for that user.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IdentityCenter {
    /// The customer managed application in IAM Identity Center whose trusted
    /// token issuer is this gateway's OAuth issuer: `CreateTokenWithIAM`'s
    /// `clientId`.
    pub application_arn: String,
    /// The role assumed with the user's identity context; its trust policy
    /// must allow `sts:AssumeRole` and `sts:SetContext` to the gateway's
    /// own AWS identity, and its permissions Q Business's `ChatSync`.
    pub role_arn: String,
    /// How long each role session lasts (`DurationSeconds`).
    #[serde(default = "default_session_seconds")]
    pub session_seconds: u64,
}

fn default_session_seconds() -> u64 {
    3600
}

impl IdentityCenter {
    /// Checks the settings' shapes, naming the key that is wrong.
    pub fn check(&self) -> Result<(), String> {
        let key = "qbusiness.identity_center";
        if !(self.application_arn.starts_with("arn:")
            && self.application_arn.contains(":application/"))
        {
            return Err(format!(
                "{key}.application_arn must be the ARN of an IAM Identity Center application \
                 (arn:aws:sso::<account>:application/<instance>/<application>), not {:?}",
                self.application_arn
            ));
        }
        if !(self.role_arn.starts_with("arn:") && self.role_arn.contains(":role/")) {
            return Err(format!(
                "{key}.role_arn must be the ARN of an IAM role \
                 (arn:aws:iam::<account>:role/<name>), not {:?}",
                self.role_arn
            ));
        }
        if !(900..=43_200).contains(&self.session_seconds) {
            return Err(format!(
                "{key}.session_seconds must be 900 to 43200 (STS's bounds), not {}",
                self.session_seconds
            ));
        }
        Ok(())
    }
}

/// Why a step has no session to call Q Business with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    /// None yet on this instance, or it ended: the principal's next request
    /// renews it.
    #[error(
        "waiting for your next request to this gateway to renew your AWS identity-aware \
         session for Amazon Q Business (a session is made from your sign-in, lasts at most \
         its configured length, and a restarted gateway has none)"
    )]
    Missing,
    /// AWS refused to make one from the principal's sign-in.
    #[error("{0}")]
    Refused(String),
    /// The last exchange did not get an answer (AWS unreachable, throttled,
    /// failing, or too slow); the principal's next request tries again.
    #[error("{0}")]
    Unavailable(String),
}

enum Entry {
    Ready {
        credentials: Credentials,
        expires_at: SystemTime,
    },
    Refused {
        reason: String,
        until: Instant,
    },
    Unavailable {
        reason: String,
    },
}

/// Why an exchange made no session.
enum ExchangeError {
    /// AWS answered no (a 4xx other than throttling).
    Refused(String),
    /// No usable answer: worth trying again on the next request.
    Unavailable(String),
}

impl ExchangeError {
    /// Sorts an SDK error by what AWS answered.
    fn from_sdk<E, R: HttpStatus>(
        error: &aws_smithy_runtime_api::client::result::SdkError<E, R>,
        text: String,
    ) -> Self {
        let status = error.raw_response().map(HttpStatus::status);
        match status {
            Some(code) if (400..500).contains(&code) && code != 429 => Self::Refused(text),
            _ => Self::Unavailable(text),
        }
    }
}

/// The HTTP status of a raw SDK response.
trait HttpStatus {
    fn status(&self) -> u16;
}

impl HttpStatus for aws_smithy_runtime_api::http::Response {
    fn status(&self) -> u16 {
        self.status().as_u16()
    }
}

struct Clients {
    oidc: aws_sdk_ssooidc::Client,
    sts: aws_sdk_sts::Client,
}

/// Each principal's identity-aware session, in memory.
pub struct IdentitySessions {
    settings: IdentityCenter,
    upstream: Option<UpstreamMetrics>,
    clients: tokio::sync::OnceCell<Clients>,
    entries: Mutex<HashMap<Owner, Entry>>,
    /// One exchange at a time per principal.
    renewing: Mutex<HashMap<Owner, Arc<tokio::sync::Mutex<()>>>>,
}

impl std::fmt::Debug for IdentitySessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IdentitySessions")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl IdentitySessions {
    /// Sessions made as `settings` say, counting the exchange's calls into
    /// `upstream`.
    pub fn new(settings: IdentityCenter, upstream: Option<UpstreamMetrics>) -> Self {
        Self {
            settings,
            upstream,
            clients: tokio::sync::OnceCell::new(),
            entries: Mutex::new(HashMap::new()),
            renewing: Mutex::new(HashMap::new()),
        }
    }

    /// The credentials `owner`'s steps call Q Business with.
    pub fn credentials(&self, owner: &Owner) -> Result<Credentials, SessionError> {
        let entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        match entries.get(owner) {
            Some(Entry::Ready {
                credentials,
                expires_at,
            }) if SystemTime::now() < *expires_at => Ok(credentials.clone()),
            Some(Entry::Refused { reason, .. }) => Err(SessionError::Refused(reason.clone())),
            Some(Entry::Unavailable { reason }) => Err(SessionError::Unavailable(reason.clone())),
            _ => Err(SessionError::Missing),
        }
    }

    /// Whether `owner` needs an exchange now: no session, one that ends
    /// within [`RENEW_BEFORE`], or a refusal whose backoff has passed.
    fn due(&self, owner: &Owner) -> bool {
        let entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        match entries.get(owner) {
            None => true,
            Some(Entry::Ready { expires_at, .. }) => expires_at
                .duration_since(SystemTime::now())
                .map_or(true, |left| left < RENEW_BEFORE),
            Some(Entry::Refused { until, .. }) => Instant::now() >= *until,
            Some(Entry::Unavailable { .. }) => true,
        }
    }

    /// Makes `owner` a session from `token` if one is due (see the module
    /// docs). Failures are remembered for [`Self::credentials`] to report.
    pub async fn renew(&self, settings: &Settings, owner: &Owner, token: &AccessToken) {
        if !self.due(owner) {
            return;
        }
        let lock = {
            let mut renewing = self.renewing.lock().unwrap_or_else(PoisonError::into_inner);
            if renewing.len() >= MAX_PRINCIPALS {
                renewing.retain(|_, lock| Arc::strong_count(lock) > 1);
            }
            renewing.entry(owner.clone()).or_default().clone()
        };
        let _one_at_a_time = lock.lock().await;
        if !self.due(owner) {
            // Another request of the same principal renewed it meanwhile.
            return;
        }
        let exchanged =
            tokio::time::timeout(EXCHANGE_TIMEOUT, self.exchange(settings, owner, token)).await;
        let entry = match exchanged {
            Ok(Ok((credentials, expires_at))) => Entry::Ready {
                credentials,
                expires_at,
            },
            Ok(Err(ExchangeError::Refused(reason))) => Entry::Refused {
                reason,
                until: Instant::now() + REFUSAL_BACKOFF,
            },
            Ok(Err(ExchangeError::Unavailable(reason))) => Entry::Unavailable { reason },
            Err(_) => Entry::Unavailable {
                reason: format!(
                    "AWS did not answer the identity-aware session exchange within {} s; it is \
                     tried again on your next request",
                    EXCHANGE_TIMEOUT.as_secs()
                ),
            },
        };
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        if let (Entry::Unavailable { .. }, Some(Entry::Ready { expires_at, .. })) =
            (&entry, entries.get(owner))
            && *expires_at > SystemTime::now()
        {
            // A session that still works is kept until it ends.
            return;
        }
        if entries.len() >= MAX_PRINCIPALS {
            let now = SystemTime::now();
            entries
                .retain(|_, e| matches!(e, Entry::Ready { expires_at, .. } if *expires_at > now));
        }
        entries.insert(owner.clone(), entry);
    }

    async fn clients(&self, settings: &Settings) -> &Clients {
        self.clients
            .get_or_init(|| async {
                let shared = settings.shared_config().await;
                let timeouts = TimeoutConfig::builder()
                    .operation_attempt_timeout(Duration::from_secs(10))
                    .build();
                let mut oidc = aws_sdk_ssooidc::config::Builder::from(&shared)
                    .timeout_config(timeouts.clone())
                    .interceptor(crate::upstream::CapAnswer);
                let mut sts = aws_sdk_sts::config::Builder::from(&shared)
                    .timeout_config(timeouts)
                    .interceptor(crate::upstream::CapAnswer);
                if let Some(upstream) = &self.upstream {
                    oidc = oidc.interceptor(crate::upstream::CountAttempts(upstream.clone()));
                    sts = sts.interceptor(crate::upstream::CountAttempts(upstream.clone()));
                }
                Clients {
                    oidc: aws_sdk_ssooidc::Client::from_conf(oidc.build()),
                    sts: aws_sdk_sts::Client::from_conf(sts.build()),
                }
            })
            .await
    }

    /// `CreateTokenWithIAM`, then `AssumeRole` with the identity context.
    /// The error is the tool error text; it never carries the token.
    async fn exchange(
        &self,
        settings: &Settings,
        owner: &Owner,
        token: &AccessToken,
    ) -> Result<(Credentials, SystemTime), ExchangeError> {
        let clients = self.clients(settings).await;
        let center = &self.settings;
        let exchanged = clients
            .oidc
            .create_token_with_iam()
            .client_id(&center.application_arn)
            .grant_type(JWT_BEARER_GRANT)
            .assertion(token.secret())
            .send()
            .await
            .map_err(|e| {
                ExchangeError::from_sdk(
                    &e,
                    format!(
                        "Error: IAM Identity Center did not exchange your sign-in for an AWS \
                         identity ({}). The operator should check that application {} trusts \
                         this gateway's OAuth issuer (a trusted token issuer) and accepts its \
                         audience.",
                        crate::error::aws_reason(&e),
                        center.application_arn
                    ),
                )
            })?;
        let context = exchanged
            .aws_additional_details()
            .and_then(|d| d.identity_context())
            .map(str::to_owned)
            .or_else(|| exchanged.id_token().and_then(identity_context_claim))
            .ok_or_else(|| {
                ExchangeError::Refused(
                    "Error: IAM Identity Center exchanged your sign-in but returned no identity \
                     context (neither awsAdditionalDetails.identityContext nor the ID token's \
                     sts:identity_context)."
                        .to_owned(),
                )
            })?;
        let seconds = i32::try_from(center.session_seconds).unwrap_or(3600);
        let context = aws_sdk_sts::types::ProvidedContext::builder()
            .provider_arn(IDENTITY_CENTER_PROVIDER)
            .context_assertion(context)
            .build();
        let assumed = clients
            .sts
            .assume_role()
            .role_arn(&center.role_arn)
            .role_session_name(session_name(owner))
            .duration_seconds(seconds)
            .provided_contexts(context)
            .send()
            .await
            .map_err(|e| {
                ExchangeError::from_sdk(
                    &e,
                    format!(
                        "Error: AWS STS did not let this gateway assume {} with your identity \
                         context ({}). The operator should check that the role's trust policy \
                         allows sts:AssumeRole and sts:SetContext to the gateway's AWS identity.",
                        center.role_arn,
                        crate::error::aws_reason(&e)
                    ),
                )
            })?;
        let Some(issued) = assumed.credentials() else {
            return Err(ExchangeError::Refused(
                "Error: AWS STS assumed the role but returned no credentials.".to_owned(),
            ));
        };
        let expires_at = SystemTime::try_from(issued.expiration)
            .unwrap_or_else(|_| SystemTime::now() + Duration::from_secs(center.session_seconds));
        let credentials = Credentials::new(
            &issued.access_key_id,
            &issued.secret_access_key,
            Some(issued.session_token.clone()),
            Some(expires_at),
            "agentgate-identity-aware-session",
        );
        Ok((credentials, expires_at))
    }
}

/// The `sts:identity_context` claim of an Identity Center ID token. Its
/// signature is not checked: it came from AWS over TLS and only goes back
/// to AWS, which checks the context itself.
fn identity_context_claim(id_token: &str) -> Option<String> {
    let payload = id_token.split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .ok()?;
    let claims: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    claims
        .get("sts:identity_context")?
        .as_str()
        .map(str::to_owned)
}

/// `RoleSessionName` (2 to 64 of `[\w+=,.@-]`): the same for a principal
/// every time, so CloudTrail groups its sessions, without its name in clear.
fn session_name(owner: &Owner) -> String {
    let digest = Sha256::digest(owner.as_str().as_bytes());
    format!("agentgate-{}", hex::encode(&digest[..12]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> IdentityCenter {
        IdentityCenter {
            application_arn: "arn:aws:sso::111122223333:application/ssoins-1/apl-2".into(),
            role_arn: "arn:aws:iam::111122223333:role/QBusinessUsers".into(),
            session_seconds: 3600,
        }
    }

    #[test]
    fn settings_are_checked_by_key() {
        assert_eq!(settings().check(), Ok(()));
        let err = IdentityCenter {
            role_arn: "QBusinessUsers".into(),
            ..settings()
        }
        .check()
        .expect_err("not an ARN");
        assert!(err.contains("qbusiness.identity_center.role_arn"), "{err}");
        let err = IdentityCenter {
            session_seconds: 60,
            ..settings()
        }
        .check()
        .expect_err("too short");
        assert!(
            err.contains("session_seconds must be 900 to 43200"),
            "{err}"
        );
        let err = IdentityCenter {
            application_arn: "apl-2".into(),
            ..settings()
        }
        .check()
        .expect_err("not an application ARN");
        assert!(err.contains("application_arn"), "{err}");
    }

    #[test]
    fn a_session_name_is_stable_valid_and_hides_the_principal() {
        let alice = Owner::new("oauth:https://issuer#alice@corp.example");
        let name = session_name(&alice);
        assert_eq!(name, session_name(&alice));
        assert_ne!(name, session_name(&Owner::new("oauth:https://issuer#bob")));
        assert!((2..=64).contains(&name.len()), "{name}");
        assert!(!name.contains("alice"), "{name}");
        assert!(
            name.chars()
                .all(|c| c.is_ascii_alphanumeric() || "_+=,.@-".contains(c)),
            "{name}"
        );
    }

    #[test]
    fn the_identity_context_is_read_from_an_id_token() {
        let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let token = format!(
            "{}.{}.sig",
            b64.encode(r#"{"alg":"RS256"}"#),
            b64.encode(r#"{"sub":"u","sts:identity_context":"ctx-1"}"#)
        );
        assert_eq!(identity_context_claim(&token).as_deref(), Some("ctx-1"));
        assert_eq!(identity_context_claim("not-a-jwt"), None);
    }

    #[test]
    fn only_a_clear_no_from_aws_is_a_refusal() {
        use aws_smithy_runtime_api::client::result::SdkError;
        use aws_smithy_runtime_api::http::{Response, StatusCode};
        use aws_smithy_types::body::SdkBody;
        let answered = |status: u16| {
            let raw = Response::new(
                StatusCode::try_from(status).expect("status"),
                SdkBody::empty(),
            );
            let error: SdkError<std::io::Error, Response> =
                SdkError::service_error(std::io::Error::other("no"), raw);
            matches!(
                ExchangeError::from_sdk(&error, String::new()),
                ExchangeError::Refused(_)
            )
        };
        assert!(answered(400), "InvalidGrantException is a refusal");
        assert!(answered(403), "AccessDenied is a refusal");
        assert!(!answered(429), "throttling is tried again");
        assert!(!answered(500), "a failure is tried again");
        let timeout: SdkError<std::io::Error, Response> = SdkError::timeout_error("slow");
        assert!(matches!(
            ExchangeError::from_sdk(&timeout, String::new()),
            ExchangeError::Unavailable(_)
        ));
    }

    #[test]
    fn no_session_until_a_request_renews_one() {
        let sessions = IdentitySessions::new(settings(), None);
        let alice = Owner::new("oauth:i#alice");
        assert!(sessions.due(&alice));
        assert_eq!(sessions.credentials(&alice), Err(SessionError::Missing));
        sessions.entries.lock().expect("lock").insert(
            alice.clone(),
            Entry::Refused {
                reason: "Error: refused".into(),
                until: Instant::now() + REFUSAL_BACKOFF,
            },
        );
        assert!(!sessions.due(&alice), "a refusal is not retried at once");
        assert_eq!(
            sessions.credentials(&alice),
            Err(SessionError::Refused("Error: refused".into()))
        );
    }
}
