//! GitHub's failures, typed, each with a message that says what to fix.

use std::time::Duration;

use agentgate_backend::JobError;

use super::model::GraphqlError;

/// Everything a GitHub call can fail with. Messages never contain the token.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum GitHubError {
    #[error(
        "GITHUB_PERSONAL_ACCESS_TOKEN is not set: set it to a GitHub user token (a classic \
         PAT with the `repo` scope, or a fine-grained token with read/write on Issues, Pull \
         requests, Contents and Actions) and restart agentgate"
    )]
    NoToken,
    #[error("GITHUB_PERSONAL_ACCESS_TOKEN contains characters that cannot go in an HTTP header")]
    BadToken,
    #[error(
        "GitHub rejected the token (401 Bad credentials): check GITHUB_PERSONAL_ACCESS_TOKEN; it \
         may be mistyped, expired or revoked"
    )]
    BadCredentials,
    #[error(
        "the token lacks the permissions for this call ({message}){}: a classic PAT needs the \
         `repo` scope; a fine-grained token needs read/write on Issues, Pull requests, Contents \
         and Actions",
        .accepted.as_ref().map(|s| format!("; GitHub accepts the scopes: {s}")).unwrap_or_default()
    )]
    InsufficientScopes {
        message: String,
        accepted: Option<String>,
    },
    #[error(
        "{message} (the repository, issue or pull request does not exist, or the token cannot see it)"
    )]
    NotFound { message: String },
    #[error("GitHub refused: {message}")]
    Forbidden { message: String },
    #[error("GitHub rate limit: {message}; retrying in {}s", .retry_after.as_secs().max(1))]
    RateLimited {
        retry_after: Duration,
        message: String,
    },
    #[error("GitHub did not accept the request: {message}")]
    Invalid { message: String },
    #[error("GitHub answered {status}: {message}")]
    Server { status: u16, message: String },
    #[error("cannot reach GitHub: {0}")]
    Network(String),
    /// The configured API cannot be reached and never answered since
    /// start: a setting to fix, not an outage to wait out.
    #[error(
        "cannot reach GitHub at {url}: {failure}, and nothing has answered there since agentgate \
         started; check GITHUB_API_URL (e.g. https://api.github.com, or \
         https://HOST/api/v3 for GitHub Enterprise Server) and restart agentgate"
    )]
    Unreachable {
        url: String,
        failure: agentgate_backend::ConnectFailure,
    },
    #[error("unexpected answer from GitHub: {0}")]
    Decode(String),
    /// A successful answer over [`super::ANSWER_CAP`]; the rest was not read.
    #[error("GitHub's answer to {operation} is {limit}")]
    TooLarge {
        operation: String,
        limit: agentgate_backend::TooLarge,
    },
}

impl GitHubError {
    pub(super) fn from_status(status: u16, message: String, accepted: Option<String>) -> Self {
        match status {
            401 => Self::BadCredentials,
            403 if message.contains("scope") || message.contains("Resource not accessible") => {
                Self::InsufficientScopes { message, accepted }
            }
            403 => Self::Forbidden { message },
            404 => Self::NotFound {
                message: if message.is_empty() {
                    "Not Found".into()
                } else {
                    message
                },
            },
            400 | 409 | 410 | 422 => Self::Invalid { message },
            _ => Self::Server { status, message },
        }
    }

    /// One GraphQL error, classified by GitHub's `type`.
    pub fn from_graphql(error: GraphqlError) -> Self {
        let message = error.message;
        match error.kind.as_deref() {
            Some("NOT_FOUND") => Self::NotFound { message },
            Some("FORBIDDEN") => Self::Forbidden { message },
            Some("INSUFFICIENT_SCOPES") => Self::InsufficientScopes {
                message,
                accepted: None,
            },
            Some("RATE_LIMITED") => Self::RateLimited {
                retry_after: Duration::from_secs(60),
                message,
            },
            Some("SERVICE_UNAVAILABLE" | "INTERNAL") => Self::Server {
                status: 200,
                message,
            },
            // A schema error (`extensions.code`) is ours and permanent; an
            // untyped error is GitHub's own trouble (timeouts), worth a retry.
            None if error.extensions.is_none() => Self::Server {
                status: 200,
                message,
            },
            _ => Self::Invalid { message },
        }
    }

    /// Whether trying again later can help.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            Self::RateLimited { .. } | Self::Server { .. } | Self::Network(_)
        )
    }

    /// As a step failure: transient errors are retried (honouring the wait
    /// GitHub asked for); the rest are fatal with `prefix: message`.
    pub fn into_job_error(self, prefix: &str) -> JobError {
        if self.is_transient() {
            let retry_after = match &self {
                Self::RateLimited { retry_after, .. } => Some(*retry_after),
                _ => None,
            };
            JobError::Retryable {
                message: format!("{prefix}: {self}"),
                retry_after,
            }
        } else {
            JobError::Fatal(rmcp::model::ErrorData::internal_error(
                format!("{prefix}: {self}"),
                None,
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(kind: Option<&str>, extensions: Option<serde_json::Value>) -> GraphqlError {
        GraphqlError {
            kind: kind.map(str::to_owned),
            message: "m".into(),
            path: Vec::new(),
            extensions,
        }
    }

    #[test]
    fn graphql_errors_are_classified_by_type() {
        assert!(matches!(
            GitHubError::from_graphql(error(Some("NOT_FOUND"), None)),
            GitHubError::NotFound { .. }
        ));
        assert!(!GitHubError::from_graphql(error(Some("FORBIDDEN"), None)).is_transient());
        // GitHub's untyped "something went wrong" is retried; a schema error is not.
        assert!(GitHubError::from_graphql(error(None, None)).is_transient());
        let schema = error(None, Some(serde_json::json!({"code": "undefinedField"})));
        assert!(!GitHubError::from_graphql(schema).is_transient());
    }
}
