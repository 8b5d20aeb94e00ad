//! Telling a setting to fix from a network hiccup when an upstream cannot
//! be reached.
//!
//! A backend retries transport failures: an upstream that is down for a
//! minute comes back. But a configured URL whose host name does not resolve,
//! or where nothing accepts connections, *before the upstream has answered
//! even once since start*, is almost always a mistyped setting; retrying it
//! for an hour only hides it from the operator. [`ConnectFailure::of`] says
//! which of the two a failed request was, and [`FirstContact`] whether the
//! upstream ever answered, so a backend can fail such a call at once with an
//! error naming its setting:
//!
//! ```text
//! request ─▶ error ─▶ ConnectFailure::of ─ Some, and !FirstContact::answered ─▶ fatal: "check URL"
//!                                        └ otherwise ─▶ retryable, as before
//! request ─▶ any answer ─▶ FirstContact::saw_answer (from then on, every failure is retried)
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Why a connection to an upstream could not be made, when the reason
/// points at a setting rather than the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ConnectFailure {
    /// The host name does not resolve.
    #[error("its host name does not resolve")]
    NameNotResolved,
    /// The host answered that nothing listens on that port.
    #[error("nothing accepts connections there (connection refused)")]
    Refused,
}

impl ConnectFailure {
    /// The setting-shaped reason `error` failed to connect, if it is one.
    /// A timeout, a reset or a TLS failure is not: those are retried.
    pub fn of(error: &reqwest::Error) -> Option<Self> {
        if !error.is_connect() {
            return None;
        }
        Self::among_causes(error)
    }

    /// The setting-shaped reason found among `error`'s causes, for clients
    /// other than reqwest (the AWS SDK's dispatch failures) whose caller has
    /// already seen that connecting failed.
    pub fn among_causes(error: &(dyn std::error::Error + 'static)) -> Option<Self> {
        let mut source = error.source();
        while let Some(cause) = source {
            if let Some(io) = cause.downcast_ref::<std::io::Error>()
                && io.kind() == std::io::ErrorKind::ConnectionRefused
            {
                return Some(Self::Refused);
            }
            // hyper-util's connector names a failed lookup so; the resolver's
            // own error type is private to it.
            if cause.to_string().starts_with("dns error") {
                return Some(Self::NameNotResolved);
            }
            source = cause.source();
        }
        None
    }
}

/// Whether an upstream has answered at least once since start (any HTTP
/// status counts). Cheap to clone; every clone shares the answer.
#[derive(Debug, Clone, Default)]
pub struct FirstContact(Arc<AtomicBool>);

impl FirstContact {
    /// Records that the upstream answered.
    pub fn saw_answer(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    /// Whether it ever did.
    pub fn answered(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn failure_of(url: &str) -> Option<ConnectFailure> {
        let error = reqwest::Client::new()
            .get(url)
            .send()
            .await
            .expect_err("nothing answers there");
        ConnectFailure::of(&error)
    }

    #[tokio::test]
    async fn a_name_that_does_not_resolve_and_a_closed_port_are_told_apart() {
        // `.invalid` never resolves (RFC 2606).
        assert_eq!(
            failure_of("http://agentgate-test.invalid/").await,
            Some(ConnectFailure::NameNotResolved)
        );
        // A port just freed on loopback: the kernel refuses at once.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        drop(listener);
        assert_eq!(
            failure_of(&format!("http://{addr}/")).await,
            Some(ConnectFailure::Refused)
        );
    }

    #[test]
    fn first_contact_is_shared_by_its_clones() {
        let contact = FirstContact::default();
        let clone = contact.clone();
        assert!(!clone.answered());
        contact.saw_answer();
        assert!(clone.answered());
    }
}
