//! Static bearer tokens (`mode = "tokens"`): each configured principal has a
//! token whose SHA-256 is in the config, so the config file holds no secret.
//! A presented token is hashed and compared with every configured hash in
//! constant time, so neither the outcome nor which entry matched shows in
//! the timing.

use agentgate_backend::Owner;
use base64::Engine as _;
use rand::RngCore as _;
use sha2::{Digest as _, Sha256};
use subtle::ConstantTimeEq as _;

use super::{AuthError, TokenEntry};

/// The configured tokens, as hashes.
#[derive(Clone)]
pub struct TokenTable {
    entries: Vec<(Owner, [u8; 32])>,
}

impl std::fmt::Debug for TokenTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Principals only: hashes are not secrets, but nobody needs them in logs.
        f.debug_list()
            .entries(self.entries.iter().map(|(owner, _)| owner.as_str()))
            .finish()
    }
}

/// Generates a new token: `agt_` and 32 random bytes, base64url.
pub fn new_token() -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    format!(
        "agt_{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    )
}

/// The lowercase hex SHA-256 of `token`, as the config's `sha256` key wants it.
pub fn token_hash(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

impl TokenTable {
    /// Reads the `[[auth.tokens]]` entries; `env` looks up `token_env` names
    /// (the process environment in production).
    pub fn new(
        entries: &[TokenEntry],
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, AuthError> {
        if entries.is_empty() {
            return Err(AuthError::Config(
                "auth.mode = \"tokens\" needs at least one [[auth.tokens]] entry \
                 (make one with `agentgate auth new-token --principal NAME`)"
                    .into(),
            ));
        }
        let mut table = Vec::with_capacity(entries.len());
        for (i, entry) in entries.iter().enumerate() {
            if entry.principal.trim().is_empty() {
                return Err(AuthError::Config(format!(
                    "auth.tokens[{i}].principal is empty; name who holds the token"
                )));
            }
            let hash = match (&entry.sha256, &entry.token_env) {
                (Some(hex_hash), None) => {
                    let bytes = hex::decode(hex_hash.trim()).ok().filter(|b| b.len() == 32);
                    let Some(bytes) = bytes else {
                        return Err(AuthError::Config(format!(
                            "auth.tokens[{i}].sha256 (principal {:?}) must be 64 hex digits, the \
                             SHA-256 of the token (`agentgate auth new-token` prints it)",
                            entry.principal
                        )));
                    };
                    let mut hash = [0u8; 32];
                    hash.copy_from_slice(&bytes);
                    hash
                }
                (None, Some(var)) => match env(var) {
                    Some(token) if !token.trim().is_empty() => Sha256::digest(token.trim()).into(),
                    _ => {
                        return Err(AuthError::Config(format!(
                            "auth.tokens[{i}].token_env names {var}, which is not set or empty; \
                             export it or use `sha256 = \"…\"` instead"
                        )));
                    }
                },
                _ => {
                    return Err(AuthError::Config(format!(
                        "auth.tokens[{i}] (principal {:?}) needs exactly one of `sha256` and \
                         `token_env`",
                        entry.principal
                    )));
                }
            };
            table.push((Owner::new(format!("token:{}", entry.principal)), hash));
        }
        Ok(Self { entries: table })
    }

    /// The principal holding `token`, if any. Every entry is compared, match
    /// or not.
    pub fn verify(&self, token: &str) -> Option<Owner> {
        let presented: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let mut found = None;
        for (owner, hash) in &self.entries {
            if bool::from(presented.ct_eq(hash)) {
                found = Some(owner);
            }
        }
        found.cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(principal: &str, sha256: Option<String>, token_env: Option<&str>) -> TokenEntry {
        TokenEntry {
            principal: principal.into(),
            sha256,
            token_env: token_env.map(Into::into),
        }
    }

    #[test]
    fn a_new_token_verifies_by_its_hash_only() {
        let token = new_token();
        assert!(token.starts_with("agt_") && token.len() > 40, "{token}");
        let table = TokenTable::new(&[entry("alice", Some(token_hash(&token)), None)], |_| None)
            .expect("valid");
        assert_eq!(
            table.verify(&token).map(|o| o.to_string()),
            Some("token:alice".into())
        );
        assert_eq!(table.verify(&new_token()), None);
        assert_eq!(table.verify(""), None);
    }

    #[test]
    fn token_env_reads_the_token_from_the_environment() {
        let table = TokenTable::new(&[entry("bob", None, Some("BOB_TOKEN"))], |name| {
            (name == "BOB_TOKEN").then(|| "s3cret".to_owned())
        })
        .expect("valid");
        assert_eq!(
            table.verify("s3cret").map(|o| o.to_string()),
            Some("token:bob".into())
        );
        let err = TokenTable::new(&[entry("bob", None, Some("NOPE"))], |_| None)
            .expect_err("unset variable");
        assert!(err.to_string().contains("NOPE"), "{err}");
    }

    #[test]
    fn bad_entries_name_the_field() {
        let err = TokenTable::new(&[entry("a", Some("abc".into()), None)], |_| None)
            .expect_err("short hash");
        assert!(err.to_string().contains("auth.tokens[0].sha256"), "{err}");
        let err = TokenTable::new(&[entry("a", None, None)], |_| None).expect_err("neither");
        assert!(err.to_string().contains("exactly one"), "{err}");
        let err = TokenTable::new(&[], |_| None).expect_err("none");
        assert!(err.to_string().contains("new-token"), "{err}");
    }
}
