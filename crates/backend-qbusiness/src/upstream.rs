//! The SDK interceptors on every Q Business call: [`CountAttempts`] counts
//! each HTTP attempt into the gateway's metrics, [`CapAnswer`] bounds the
//! size of each answer.
//!
//! Interceptors see every attempt, the SDK's own retries of throttling and
//! 5xx included: the counter then matches what Q Business received, and a
//! throttled attempt that a retry hid is still visible.

use agentgate_backend::TooLarge;
use agentgate_backend::{UpstreamMetrics, UpstreamOutcome};
use aws_sdk_qbusiness::config::interceptors::{
    BeforeDeserializationInterceptorContextMut, FinalizerInterceptorContextRef,
};
use aws_sdk_qbusiness::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::orchestrator::Metadata;
use aws_smithy_types::body::SdkBody;

/// The most bytes one answer may have. The API reference sets no size on a
/// ChatSync or ListMessages answer; real ones are kilobytes (an answer's
/// text and its source attributions), so this is far above any, and a
/// misbehaving endpoint or proxy costs at most this much memory.
pub(crate) const ANSWER_CAP: u64 = 8 * 1024 * 1024;

/// Bounds every answer the SDK reads to [`ANSWER_CAP`] bytes: one whose
/// `Content-Length` is over it is refused unread; any other is cut off
/// once it passes it. Either way the call fails with [`TooLarge`] among its
/// causes (see [`crate::error::answer_too_large`]).
#[derive(Debug)]
pub(crate) struct CapAnswer;

impl Intercept for CapAnswer {
    fn name(&self) -> &'static str {
        "agentgate-answer-cap"
    }

    fn modify_before_deserialization(
        &self,
        context: &mut BeforeDeserializationInterceptorContextMut<'_>,
        _components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let body = context.response_mut().body_mut();
        if let Some(declared) = body.content_length().filter(|&n| n > ANSWER_CAP) {
            return Err(Box::new(TooLarge {
                read: 0,
                declared: Some(declared),
                cap: ANSWER_CAP,
            }));
        }
        let whole = std::mem::replace(body, SdkBody::taken());
        let cap = usize::try_from(ANSWER_CAP).unwrap_or(usize::MAX);
        *body = SdkBody::from_body_1_x(http_body_util::Limited::new(whole, cap));
        Ok(())
    }
}

/// Records each attempt's operation (`ChatSync`, …) and outcome.
#[derive(Debug)]
pub(crate) struct CountAttempts(pub(crate) UpstreamMetrics);

impl Intercept for CountAttempts {
    fn name(&self) -> &'static str {
        "agentgate-upstream-metrics"
    }

    fn read_after_attempt(
        &self,
        context: &FinalizerInterceptorContextRef<'_>,
        _components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let operation = cfg.load::<Metadata>().map_or("unknown", Metadata::name);
        let outcome = context
            .response()
            .map_or(UpstreamOutcome::Transport, |response| {
                let error_type = response
                    .headers()
                    .get("x-amzn-errortype")
                    .unwrap_or_default();
                if rejects_credentials(error_type) {
                    UpstreamOutcome::Rejected
                } else {
                    UpstreamOutcome::from_status(response.status().as_u16())
                }
            });
        self.0.record(operation, outcome);
        Ok(())
    }
}

/// Whether an AWS error type (`x-amzn-ErrorType`, e.g.
/// `UnrecognizedClientException:http://…`) says the request's credentials
/// are not valid: unknown key, bad signature, expired token. An
/// `AccessDeniedException` is a permission the identity lacks, not a bad
/// credential, and is left a client error.
fn rejects_credentials(error_type: &str) -> bool {
    let code = error_type.split(':').next().unwrap_or_default();
    matches!(
        code,
        "UnrecognizedClientException"
            | "InvalidClientTokenId"
            | "InvalidSignatureException"
            | "SignatureDoesNotMatch"
            | "ExpiredTokenException"
            | "ExpiredToken"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_invalid_credentials_count_as_rejected() {
        assert!(rejects_credentials(
            "UnrecognizedClientException:http://internal.amazon.com/"
        ));
        assert!(rejects_credentials("InvalidSignatureException"));
        assert!(rejects_credentials("ExpiredTokenException"));
        assert!(!rejects_credentials("AccessDeniedException"));
        assert!(!rejects_credentials("ThrottlingException"));
        assert!(!rejects_credentials(""));
    }
}
