//! Task ids and owners: the handle a client holds, and whose work it is.

use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rand::RngCore as _;
use serde::{Deserialize, Serialize};

/// A task handle: 160 random bits, base64url without padding (27 characters).
///
/// The spec asks for at least 128 bits of entropy; ids are unguessable so a
/// handle alone never leaks another principal's work (ownership is still
/// checked on every call).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TaskId(String);

impl TaskId {
    /// Number of random bytes in a freshly minted id.
    pub const RANDOM_BYTES: usize = 20;

    /// Mints a new id from the thread-local CSPRNG (ChaCha, seeded by the OS).
    pub fn generate() -> Self {
        let mut bytes = [0u8; Self::RANDOM_BYTES];
        rand::rng().fill_bytes(&mut bytes);
        Self(URL_SAFE_NO_PAD.encode(bytes))
    }

    /// Wraps an id received from a client. Any string is accepted: an id that
    /// was never minted simply matches no task.
    pub fn from_client(raw: impl Into<String>) -> Self {
        Self(raw.into())
    }

    /// The id as clients see it.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The principal a task belongs to.
///
/// On stdio this is the local user (`local:<name>`); on HTTP it is the
/// authenticated principal (`anonymous` until authentication is configured).
/// A task of another owner is indistinguishable from an unknown id.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Owner(String);

impl Owner {
    /// The principal named `principal` (e.g. `token:alice`).
    pub fn new(principal: impl Into<String>) -> Self {
        Self(principal.into())
    }

    /// The principal of unauthenticated HTTP clients.
    pub fn anonymous() -> Self {
        Self("anonymous".to_owned())
    }

    /// The user running this process, for stdio servers.
    pub fn local_user() -> Self {
        let name = std::env::var("USER")
            .or_else(|_| std::env::var("USERNAME"))
            .unwrap_or_else(|_| "unknown".to_owned());
        Self(format!("local:{name}"))
    }

    /// The principal's name, as stored.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Owner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_ids_are_long_and_distinct() {
        let a = TaskId::generate();
        let b = TaskId::generate();
        assert_ne!(a, b);
        // 20 bytes -> 27 base64url characters, i.e. 160 bits of entropy.
        assert_eq!(a.as_str().len(), 27);
        assert!(
            a.as_str()
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        );
    }
}

/// The OAuth access token a request to agentgate was authenticated with:
/// what a backend that speaks upstream *as the principal* exchanges for the
/// principal's own upstream identity (see
/// [`Backend::principal_request`](crate::Backend::principal_request)).
/// `Debug` redacts it; never log, store or return it.
#[derive(Clone, PartialEq, Eq)]
pub struct AccessToken(std::sync::Arc<str>);

impl AccessToken {
    /// Wraps a bearer token.
    pub fn new(token: impl Into<std::sync::Arc<str>>) -> Self {
        Self(token.into())
    }

    /// The token itself, for the one upstream call that exchanges it.
    pub fn secret(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for AccessToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AccessToken(<redacted>)")
    }
}
