//! Counting ChatSync requests into the gateway's metrics.
//!
//! An SDK interceptor, so every HTTP attempt counts, the SDK's own retries
//! of throttling and 5xx included: the counter then matches what Q Business
//! received, and a throttled attempt that a retry hid is still visible.

use agentgate_backend::{UpstreamMetrics, UpstreamOutcome};
use aws_sdk_qbusiness::config::interceptors::FinalizerInterceptorContextRef;
use aws_sdk_qbusiness::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::orchestrator::Metadata;

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
