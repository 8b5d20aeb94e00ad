//! ChatSync failures as messages that say what to fix.
//!
//! Every message starts with upstream's prefix, `Error: Amazon Q Business API
//! error An error occurred (<Code>) when calling the ChatSync operation:
//! <message>`, so anything matching on it keeps working, then adds the fix.
//! Failures that never reached the service (no credentials, endpoint
//! unreachable, timeouts) say so instead. The SDK's own error texts carry no
//! secrets; nothing here adds any.

use agentgate_backend::{JobError, Step, StepResult};
use aws_sdk_qbusiness::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_qbusiness::operation::chat_sync::ChatSyncError;
use aws_sdk_qbusiness::operation::list_messages::ListMessagesError;
use aws_smithy_types::retry::ErrorKind;
use rmcp::model::ErrorData;

/// Why a call to Amazon Q Business (a ChatSync, or the ListMessages read
/// before an approved action) gave no answer, and so how the step ends.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ChatError {
    /// Worth another attempt later (still throttled or failing after the
    /// SDK's attempts, a timeout, the endpoint unreachable): the step is
    /// retried with the same `clientToken`, and the text is its status.
    #[error("{0}")]
    Transient(String),
    /// Retrying cannot help (settings, credentials, the request, a refusal):
    /// the call ends with this text as its `isError` result.
    #[error("{0}")]
    Final(String),
    /// Q Business asked for input but named no conversation to answer in.
    #[error("Amazon Q Business asked for input without a conversation id to answer in")]
    NoConversation,
}

impl ChatError {
    /// A failed ChatSync, sent `attempts` times.
    pub fn chat_sync<R: std::fmt::Debug>(
        error: &SdkError<ChatSyncError, R>,
        application_id: &str,
        endpoint_hint: &str,
        attempts: u32,
    ) -> Self {
        let text = describe(error, application_id, endpoint_hint, attempts);
        if is_transient(error) {
            Self::Transient(text)
        } else {
            Self::Final(text)
        }
    }

    /// The step this failure ends: a retry, a tool error, or (for an answer
    /// agentgate cannot continue) a failed task.
    pub fn into_step<S>(self) -> StepResult<S> {
        match self {
            Self::Transient(message) => Err(JobError::Retryable {
                message,
                retry_after: None,
            }),
            Self::Final(text) => Ok(Step::Done(crate::answer::error_result(text))),
            Self::NoConversation => Err(JobError::Fatal(ErrorData::internal_error(
                self.to_string(),
                None,
            ))),
        }
    }
}

/// Attempts the SDK's standard retry mode makes before giving up.
pub const SDK_ATTEMPTS: u32 = 3;

/// An AWS SDK error as a person reads it: the service's code and message,
/// or the SDK's account of a failure on the way; never a `Debug` dump.
pub fn aws_reason<E, R>(error: &SdkError<E, R>) -> String
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug,
{
    match error {
        SdkError::ServiceError(service) => {
            let err = service.err();
            format!(
                "{}: {}",
                err.code().unwrap_or("an error without a code"),
                err.message().unwrap_or("no message")
            )
        }
        SdkError::TimeoutError(_) => "no answer in time".to_owned(),
        other => DisplayErrorContext(other).to_string(),
    }
}

fn upstream_prefix(code: &str, message: &str) -> String {
    format!(
        "Error: Amazon Q Business API error An error occurred ({code}) when calling the ChatSync \
         operation: {message}"
    )
}

/// The tool error text for a failed ChatSync call, sent `attempts` times.
pub fn describe<R: std::fmt::Debug>(
    error: &SdkError<ChatSyncError, R>,
    application_id: &str,
    endpoint_hint: &str,
    attempts: u32,
) -> String {
    if let Some(text) = answer_too_large(error, endpoint_hint) {
        return text;
    }
    match error {
        SdkError::ServiceError(service) => {
            let err = service.err();
            let coded = err.code().filter(|c| !c.is_empty());
            let code = coded.unwrap_or("Unknown");
            let message = err.message().unwrap_or("no message");
            let fix = match err {
                ChatSyncError::ValidationException(v) => {
                    let fields: Vec<String> = v
                        .fields()
                        .iter()
                        .map(|f| format!("{}: {}", f.name(), f.message()))
                        .collect();
                    if fields.is_empty() {
                        "Fix the request and try again.".to_owned()
                    } else {
                        format!("Invalid fields: {}.", fields.join("; "))
                    }
                }
                ChatSyncError::AccessDeniedException(_) => {
                    "The caller's IAM identity needs permission for the action \
                     `qbusiness:ChatSync` on this application (and, for identity-aware \
                     applications, a user the application knows)."
                        .to_owned()
                }
                ChatSyncError::ResourceNotFoundException(_) => format!(
                    "Check QBUSINESS_APPLICATION_ID ({application_id}) and AWS_REGION: the \
                     application, conversation or plugin was not found there."
                ),
                ChatSyncError::ThrottlingException(_) => format!(
                    "Amazon Q Business is still throttling after {attempts} attempt(s); wait a \
                     little and try again, or ask AWS for a higher request quota."
                ),
                ChatSyncError::LicenseNotFoundException(_) => {
                    "The user has no active Amazon Q Business subscription; ask an administrator \
                     to assign one."
                        .to_owned()
                }
                ChatSyncError::ExternalResourceException(_) => {
                    "A data source or plugin configured for the application is failing; check \
                     its configuration in the Amazon Q Business console."
                        .to_owned()
                }
                ChatSyncError::ConflictException(_) => {
                    "The conversation changed concurrently (or the client token was reused with \
                     different input); start again or follow up on the latest message."
                        .to_owned()
                }
                ChatSyncError::InternalServerException(_) => format!(
                    "Amazon Q Business failed internally (after {attempts} attempt(s)); try \
                     again later."
                ),
                _ => match code {
                    "InvalidSignatureException" | "SignatureDoesNotMatch" => {
                        "AWS rejected the request signature: check the secret access key of \
                         the credentials in use and that this machine's clock is correct."
                            .to_owned()
                    }
                    "UnrecognizedClientException" | "InvalidClientTokenId" => {
                        "AWS does not recognise the access key: check AWS_ACCESS_KEY_ID or the \
                         profile in AWS_PROFILE."
                            .to_owned()
                    }
                    "ExpiredTokenException" | "ExpiredToken" => {
                        "The credentials have expired: refresh them (for example `aws sso login`) \
                         and try again."
                            .to_owned()
                    }
                    "MissingAuthenticationTokenException" => {
                        "The request was not signed: configure AWS credentials.".to_owned()
                    }
                    // No code at all: the answer did not parse (a proxy's
                    // page, a truncated body, fields of the wrong type), so
                    // say that, with the parser's reason.
                    _ if coded.is_none() => format!(
                        "The answer could not be read as a ChatSync response ({}); check that \
                         {endpoint_hint} is Amazon Q Business, or try again.",
                        causes(err)
                    ),
                    _ => "See the AWS error code above.".to_owned(),
                },
            };
            format!("{} {fix}", upstream_prefix(code, message))
        }
        SdkError::TimeoutError(_) => format!(
            "Error: Amazon Q Business did not answer in time ({endpoint_hint}); try again later."
        ),
        SdkError::DispatchFailure(failure) => {
            let detail = DisplayErrorContext(error).to_string();
            if detail.contains("credentials") || detail.contains("Credentials") {
                format!(
                    "Error: no usable AWS credentials: {detail}. Configure the standard AWS \
                     credential chain (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE, SSO \
                     or an instance role)."
                )
            } else if failure.is_io() || failure.is_timeout() {
                format!(
                    "Error: cannot reach Amazon Q Business ({endpoint_hint}): {detail}. Check the \
                     network, AWS_REGION and AWS_ENDPOINT_URL_QBUSINESS."
                )
            } else if failure.as_other() == Some(ErrorKind::TransientError) {
                format!(
                    "Error: the connection to Amazon Q Business ({endpoint_hint}) closed before \
                     an answer came back: {detail}. Trying again."
                )
            } else {
                format!("Error: the ChatSync request failed before an answer came back: {detail}")
            }
        }
        SdkError::ResponseError(_) => format!(
            "Error: the answer from Amazon Q Business ({endpoint_hint}) was cut off: {}. Trying \
             again.",
            DisplayErrorContext(error)
        ),
        other => {
            let detail = DisplayErrorContext(other).to_string();
            if detail.contains("credentials") {
                format!(
                    "Error: no usable AWS credentials: {detail}. Configure the standard AWS \
                     credential chain (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE, SSO \
                     or an instance role)."
                )
            } else {
                format!("Error: the ChatSync request failed: {detail}")
            }
        }
    }
}

/// The tool error text when `error` is an answer over the size cap
/// ([`crate::upstream::CapAnswer`]), found among its causes. Not transient:
/// the same question is answered the same way.
pub fn answer_too_large(error: &dyn std::error::Error, endpoint_hint: &str) -> Option<String> {
    // The causes, not `error` itself: a failed call is never the cap's own
    // error, and only causes can be looked into (they are `'static`).
    let mut cause = error.source();
    while let Some(e) = cause {
        let over = if let Some(too) = e.downcast_ref::<agentgate_backend::TooLarge>() {
            Some(too.to_string())
        } else if e.is::<http_body_util::LengthLimitError>() {
            Some(format!(
                "over the {} cap",
                agentgate_backend::Size(crate::upstream::ANSWER_CAP)
            ))
        } else {
            None
        };
        if let Some(over) = over {
            return Some(format!(
                "Error: the answer from Amazon Q Business ({endpoint_hint}) is {over}; \
                 agentgate reads no larger answer. Check that {endpoint_hint} is Amazon Q \
                 Business and not a proxy's page."
            ));
        }
        cause = e.source();
    }
    None
}

/// The causes under `error`, outermost first, as `a: b`.
fn causes(error: &dyn std::error::Error) -> String {
    let mut parts = Vec::new();
    let mut cause = error.source();
    while let Some(e) = cause {
        parts.push(e.to_string());
        cause = e.source();
    }
    if parts.is_empty() {
        error.to_string()
    } else {
        parts.join(": ")
    }
}

/// Whether a failed ChatSync is worth trying again later: still throttled
/// or failing internally after the SDK's own attempts, a timeout, or the
/// endpoint unreachable (an outage). The step is then retried by the
/// scheduler with the same `clientToken`, so a turn that landed before its
/// answer was lost is replayed, not repeated. Credential and request
/// problems are not transient: retrying cannot fix them.
pub fn is_transient<R: std::fmt::Debug>(error: &SdkError<ChatSyncError, R>) -> bool {
    if answer_too_large(error, "").is_some() {
        return false;
    }
    match error {
        SdkError::ServiceError(service) => matches!(
            service.err(),
            ChatSyncError::ThrottlingException(_) | ChatSyncError::InternalServerException(_)
        ),
        other => transport_is_transient(other),
    }
}

/// The tool error for a call to `endpoint_hint` that could not connect
/// because of a setting (a host name that does not resolve, a refused
/// port), when the caller knows Q Business never answered since start;
/// `None` for any other failure.
pub fn unreachable<E, R>(error: &SdkError<E, R>, endpoint_hint: &str) -> Option<String>
where
    E: std::error::Error + 'static,
    R: std::fmt::Debug,
{
    let SdkError::DispatchFailure(failure) = error else {
        return None;
    };
    if !failure.is_io() {
        return None;
    }
    let failure = agentgate_backend::ConnectFailure::among_causes(failure.as_connector_error()?)?;
    Some(format!(
        "Error: cannot reach Amazon Q Business ({endpoint_hint}): {failure}, and nothing has \
         answered there since agentgate started. Check AWS_REGION (a region Amazon Q Business \
         runs in, e.g. us-east-1) and AWS_ENDPOINT_URL_QBUSINESS, then restart agentgate."
    ))
}

/// Whether a call that got no answer from the service itself (the service's
/// own errors are classified per operation) is worth trying again later:
/// - a timeout;
/// - the endpoint unreachable, or a connection the SDK itself calls
///   transient (a pooled keep-alive connection the server had closed shows as
///   hyper's "connection closed before message completed");
/// - an answer cut off while it was read.
///
/// Missing credentials and a request that cannot be built are not: trying
/// again cannot fix them.
fn transport_is_transient<E, R: std::fmt::Debug>(error: &SdkError<E, R>) -> bool
where
    E: std::error::Error + 'static,
{
    match error {
        SdkError::TimeoutError(_) | SdkError::ResponseError(_) => true,
        SdkError::DispatchFailure(failure) => {
            let detail = DisplayErrorContext(error).to_string();
            !detail.contains("credentials")
                && !detail.contains("Credentials")
                && (failure.is_io()
                    || failure.is_timeout()
                    || failure.as_other() == Some(ErrorKind::TransientError))
        }
        _ => false,
    }
}

/// The tool error text for a failed ListMessages call (read before an
/// approved plugin action is sent), and whether it is worth trying again
/// later (the same rule as [`is_transient`]).
pub fn describe_list_messages<R: std::fmt::Debug>(
    error: &SdkError<ListMessagesError, R>,
    endpoint_hint: &str,
) -> (String, bool) {
    if let Some(text) = answer_too_large(error, endpoint_hint) {
        return (text, false);
    }
    match error {
        SdkError::ServiceError(service) => {
            let err = service.err();
            let code = err.code().filter(|c| !c.is_empty()).unwrap_or("Unknown");
            let message = err.message().unwrap_or("no message");
            let transient = matches!(
                err,
                ListMessagesError::ThrottlingException(_)
                    | ListMessagesError::InternalServerException(_)
            );
            let fix = match err {
                ListMessagesError::AccessDeniedException(_) => {
                    " The caller's IAM identity needs permission for the action \
                     `qbusiness:ListMessages` on this application as well as `qbusiness:ChatSync`."
                }
                _ => "",
            };
            (
                format!(
                    "Error: Amazon Q Business API error An error occurred ({code}) when calling \
                     the ListMessages operation: {message}{fix}"
                ),
                transient,
            )
        }
        SdkError::TimeoutError(_) => (
            format!("Error: Amazon Q Business did not answer in time ({endpoint_hint})."),
            true,
        ),
        SdkError::DispatchFailure(_) => (
            format!(
                "Error: Amazon Q Business could not be reached ({endpoint_hint}): {}",
                DisplayErrorContext(error)
            ),
            transport_is_transient(error),
        ),
        SdkError::ResponseError(_) => (
            format!(
                "Error: the conversation read from Amazon Q Business ({endpoint_hint}) was cut \
                 off: {}",
                DisplayErrorContext(error)
            ),
            true,
        ),
        other => (
            format!(
                "Error: reading the conversation from Amazon Q Business failed: {}",
                DisplayErrorContext(other)
            ),
            false,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_qbusiness::error::ErrorMetadata;

    #[test]
    fn each_chat_error_ends_the_step_its_own_way() {
        let throttled = ChatSyncError::ThrottlingException(
            aws_sdk_qbusiness::types::error::ThrottlingException::builder()
                .message("slow down")
                .build()
                .expect("message is its only required field"),
        );
        let transient =
            ChatError::chat_sync(&SdkError::service_error(throttled, ()), "app", "e", 3);
        assert!(
            matches!(transient, ChatError::Transient(_)),
            "{transient:?}"
        );
        match transient.into_step::<()>() {
            Err(JobError::Retryable { message, .. }) => {
                assert!(
                    message.contains("still throttling after 3 attempt(s)"),
                    "{message}"
                );
            }
            other => panic!("a throttled ChatSync must be retried: {other:?}"),
        }

        let denied = ChatSyncError::generic(
            ErrorMetadata::builder()
                .code("UnrecognizedClientException")
                .message("bad key")
                .build(),
        );
        let fatal = ChatError::chat_sync(&SdkError::service_error(denied, ()), "app", "e", 3);
        match fatal.into_step::<()>() {
            Ok(Step::Done(result)) => {
                assert_eq!(result.is_error, Some(true));
                let text = serde_json::to_string(&result.content).expect("content serializes");
                assert!(text.contains("bad key"), "{text}");
            }
            other => panic!("a refused ChatSync is a tool error: {other:?}"),
        }

        assert!(matches!(
            ChatError::NoConversation.into_step::<()>(),
            Err(JobError::Fatal(_))
        ));
    }

    fn unmodeled(code: &str) -> String {
        let err = ChatSyncError::generic(ErrorMetadata::builder().code(code).message("m").build());
        describe(
            &SdkError::service_error(err, ()),
            "app",
            "endpoint",
            SDK_ATTEMPTS,
        )
    }

    #[test]
    fn an_unreadable_answer_says_why_not_just_unknown() {
        // What the SDK gives for a 200 whose body does not parse.
        let err = ChatSyncError::unhandled(std::io::Error::other("expected StartObject"));
        let text = describe(
            &SdkError::service_error(err, ()),
            "app",
            "http://q.example",
            SDK_ATTEMPTS,
        );
        assert!(text.contains("(Unknown)"), "{text}");
        assert!(text.contains("could not be read"), "{text}");
        assert!(text.contains("expected StartObject"), "{text}");
        assert!(text.contains("http://q.example"), "{text}");
    }

    #[test]
    fn credential_problems_outside_the_model_say_what_to_check() {
        assert!(unmodeled("ExpiredTokenException").contains("credentials have expired"));
        assert!(unmodeled("InvalidSignatureException").contains("secret access key"));
        assert!(unmodeled("UnrecognizedClientException").contains("AWS_ACCESS_KEY_ID"));
        let text = unmodeled("ExpiredTokenException");
        assert!(
            text.starts_with(
                "Error: Amazon Q Business API error An error occurred (ExpiredTokenException)"
            ),
            "{text}"
        );
    }

    #[test]
    fn only_throttling_and_internal_errors_are_transient_among_service_errors() {
        let transient = |err: ChatSyncError| is_transient(&SdkError::service_error(err, ()));
        let meta = || ErrorMetadata::builder().message("m").build();
        use aws_sdk_qbusiness::types::error::{
            AccessDeniedException, InternalServerException, ThrottlingException,
        };
        assert!(transient(ChatSyncError::ThrottlingException(
            ThrottlingException::builder()
                .message("m")
                .meta(meta())
                .build()
                .expect("build")
        )));
        assert!(transient(ChatSyncError::InternalServerException(
            InternalServerException::builder()
                .message("m")
                .meta(meta())
                .build()
                .expect("build")
        )));
        assert!(!transient(ChatSyncError::AccessDeniedException(
            AccessDeniedException::builder()
                .message("m")
                .meta(meta())
                .build()
                .expect("build")
        )));
        assert!(!transient(ChatSyncError::generic(meta())));
    }

    /// What went wrong on the way, not at the service: each kind is
    /// retried or not as its cause allows, for both operations.
    #[test]
    fn transport_failures_are_retried_when_trying_again_can_help() {
        use aws_smithy_runtime_api::client::result::ConnectorError;
        const CAUSE: &str = "connection closed before message completed";
        /// One failure, for either operation.
        fn failure<E>(kind: &str) -> SdkError<E, ()> {
            let cause = || -> Box<dyn std::error::Error + Send + Sync> { CAUSE.into() };
            match kind {
                "stale keep-alive" => SdkError::dispatch_failure(ConnectorError::other(
                    cause(),
                    Some(ErrorKind::TransientError),
                )),
                "unreachable" => SdkError::dispatch_failure(ConnectorError::io(cause())),
                "unknown connector failure" => {
                    SdkError::dispatch_failure(ConnectorError::other(cause(), None))
                }
                "refused to send" => SdkError::dispatch_failure(ConnectorError::user(cause())),
                "answer cut off" => SdkError::response_error(cause(), ()),
                _ => SdkError::construction_failure(cause()),
            }
        }
        for (kind, expected) in [
            ("stale keep-alive", true),
            ("unreachable", true),
            ("unknown connector failure", false),
            ("refused to send", false),
            ("answer cut off", true),
            ("not built", false),
        ] {
            let chat = failure::<ChatSyncError>(kind);
            assert_eq!(is_transient(&chat), expected, "ChatSync: {kind}");
            let text = describe(&chat, "app", "https://q.example", 1);
            assert!(text.starts_with("Error: "), "{kind}: {text}");
            assert!(text.contains(CAUSE), "{kind}: the cause is kept: {text}");
            let (text, transient) =
                describe_list_messages(&failure::<ListMessagesError>(kind), "https://q.example");
            assert_eq!(transient, expected, "ListMessages: {kind}");
            assert!(text.contains(CAUSE), "{kind}: the cause is kept: {text}");
        }
    }
}
