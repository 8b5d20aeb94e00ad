//! Who a principal speaks to Amazon Q Business as.
//!
//! ChatSync's `userId` and `userGroups` decide, on an application that
//! honours them, whose documents an answer may draw on and whose
//! conversations it may continue. On a shared gateway they must come from
//! the operator, never from the caller: a tool argument would let any
//! principal answer as anyone (`user_id: "cfo@…"`, `user_groups:
//! ["Finance-Admins"]`). So:
//!
//! ```text
//! tools/call ─▶ caller sent user_id / user_groups? ─ yes ─┬─ trust_caller_identity ─▶ the caller's
//!                                                          └─ otherwise ─────────────▶ refused, naming the field
//!                                                  ─ no ──┬─ [qbusiness.users."<principal>"] ─▶ that identity
//!                                                          └─ otherwise ─────────────▶ none (the credentials' own)
//! ```
//!
//! ```toml
//! [qbusiness.users."token:alice"]          # the principal, as tasks are owned
//! user_id = "alice@corp.example"
//! user_groups = ["Engineering"]
//! ```
//!
//! `trust_caller_identity = true` is for a gateway that serves one person
//! (say, over stdio), where the caller is the operator.

use std::collections::BTreeMap;

use agentgate_backend::Owner;
use serde::Deserialize;

use crate::args::ValidQuery;

/// `[qbusiness.users."<principal>"]`: the Q Business identity of one
/// principal.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserIdentity {
    /// ChatSync's `userId`.
    pub user_id: Option<String>,
    /// ChatSync's `userGroups`.
    #[serde(default)]
    pub user_groups: Vec<String>,
}

/// The identities of every principal, from the `[qbusiness]` table.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Identities {
    /// Whether a caller may name the identity itself (single-user gateways).
    pub trust_caller: bool,
    /// Principal (`token:alice`, `oauth:<iss>#<sub>`, `local:<user>`) →
    /// identity.
    pub users: BTreeMap<String, UserIdentity>,
}

impl Identities {
    /// Checks the configured identities against ChatSync's limits, naming
    /// the key that is wrong.
    pub fn check(&self) -> Result<(), String> {
        for (principal, identity) in &self.users {
            if let Some(user) = &identity.user_id
                && (user.is_empty() || user.chars().count() > 1024)
            {
                return Err(format!(
                    "qbusiness.users.\"{principal}\".user_id must be 1 to 1024 characters"
                ));
            }
            if let Some(i) = identity
                .user_groups
                .iter()
                .position(|g| g.is_empty() || g.chars().count() > 2048)
            {
                return Err(format!(
                    "qbusiness.users.\"{principal}\".user_groups[{i}] must be 1 to 2048 characters"
                ));
            }
        }
        Ok(())
    }

    /// The identity `owner`'s call speaks as, or the tool error that
    /// refuses an identity in the arguments.
    pub fn for_call(&self, owner: &Owner, query: &ValidQuery) -> Result<UserIdentity, String> {
        let named = match (&query.user_id, query.user_groups.is_empty()) {
            (Some(_), _) => Some("user_id"),
            (None, false) => Some("user_groups"),
            (None, true) => None,
        };
        match named {
            Some(_) if self.trust_caller => Ok(UserIdentity {
                user_id: query.user_id.clone(),
                user_groups: query.user_groups.clone(),
            }),
            Some(field) => Err(format!(
                "Error: `{field}` is not accepted on this gateway: Amazon Q Business answers as \
                 the identity the operator configured for your principal ([qbusiness.users]), \
                 never as one named in the arguments. Leave `user_id` and `user_groups` out. \
                 (An operator of a single-user gateway can set \
                 qbusiness.trust_caller_identity = true.)"
            )),
            None => Ok(self.users.get(owner.as_str()).cloned().unwrap_or_default()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::QueryArgs;

    fn query(v: serde_json::Value) -> ValidQuery {
        serde_json::from_value::<QueryArgs>(v)
            .expect("args")
            .validate()
            .expect("valid")
    }

    fn alice_mapped() -> Identities {
        Identities {
            trust_caller: false,
            users: BTreeMap::from([(
                "token:alice".to_owned(),
                UserIdentity {
                    user_id: Some("alice@corp.example".into()),
                    user_groups: vec!["Engineering".into()],
                },
            )]),
        }
    }

    #[test]
    fn an_identity_in_the_arguments_is_refused_naming_the_field_and_the_setting() {
        let ids = alice_mapped();
        let bob = Owner::new("token:bob");
        let err = ids
            .for_call(
                &bob,
                &query(serde_json::json!({"query": "q", "user_id": "cfo@corp.example"})),
            )
            .expect_err("refused");
        assert!(
            err.contains("`user_id`") && err.contains("[qbusiness.users]"),
            "{err}"
        );
        assert!(err.contains("trust_caller_identity"), "{err}");
        let err = ids
            .for_call(
                &bob,
                &query(serde_json::json!({"query": "q", "user_groups": ["Finance-Admins"]})),
            )
            .expect_err("refused");
        assert!(err.contains("`user_groups`"), "{err}");
    }

    #[test]
    fn a_principal_speaks_as_its_configured_identity_or_as_nobody() {
        let ids = alice_mapped();
        let q = query(serde_json::json!({"query": "q"}));
        let alice = ids.for_call(&Owner::new("token:alice"), &q).expect("alice");
        assert_eq!(alice.user_id.as_deref(), Some("alice@corp.example"));
        assert_eq!(alice.user_groups, vec!["Engineering".to_owned()]);
        let bob = ids.for_call(&Owner::new("token:bob"), &q).expect("bob");
        assert_eq!(bob, UserIdentity::default());
    }

    #[test]
    fn a_single_user_gateway_may_trust_the_caller() {
        let ids = Identities {
            trust_caller: true,
            ..alice_mapped()
        };
        let q = query(serde_json::json!({"query": "q", "user_id": "me@corp.example"}));
        let me = ids.for_call(&Owner::new("local:me"), &q).expect("trusted");
        assert_eq!(me.user_id.as_deref(), Some("me@corp.example"));
    }

    #[test]
    fn configured_identities_are_checked_by_key() {
        let mut ids = alice_mapped();
        ids.users.insert(
            "token:bob".into(),
            UserIdentity {
                user_id: Some(String::new()),
                user_groups: vec![],
            },
        );
        let err = ids.check().expect_err("empty user id");
        assert!(
            err.contains("qbusiness.users.\"token:bob\".user_id"),
            "{err}"
        );
    }
}
