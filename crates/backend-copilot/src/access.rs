//! What each principal may do on GitHub, and as whom.
//!
//! A shared gateway must not let every principal reach every repository its
//! token reaches, nor make every assignment and comment look like the
//! gateway's. The operator lists, per principal, the repositories it may
//! touch and, optionally, a GitHub token of its own:
//!
//! ```toml
//! [copilot.principals."token:alice"]     # the principal, as tasks are owned
//! repositories = ["octo-org/app", "octo-org/docs-*", "octo-org/*"]
//! token_env = "ALICE_GITHUB_TOKEN"       # optional: her own token
//! ```
//!
//! ```text
//! step ─▶ Access::github_for(principal, owner/repo)
//!           ├─ no [copilot.principals] at all ─▶ the gateway's token, any repository
//!           ├─ principal not listed ──────────▶ refused, naming the setting
//!           ├─ repository not listed ─────────▶ refused, naming the repository and the setting
//!           └─ allowed ───────────────────────▶ the principal's token, else the gateway's
//! ```
//!
//! The check runs before every step that calls GitHub for the task, so a
//! refused repository sees no request at all. The watcher, which reads the
//! state of every followed issue and pull request in one batch, reads with
//! the gateway's token.

use std::collections::BTreeMap;

use agentgate_backend::Owner;
use serde::Deserialize;

use crate::github::GitHub;
use crate::settings::Token;

/// `[copilot.principals."<principal>"]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrincipalAccess {
    /// `owner/repo`, or a pattern with one `*` at the end of either part
    /// (`octo-org/*`, `octo-org/docs-*`). Compared without regard to case,
    /// as GitHub compares names.
    #[serde(default)]
    pub repositories: Vec<String>,
    /// An environment variable holding the principal's own GitHub token:
    /// its assignments and comments are then made as that person.
    #[serde(default)]
    pub token_env: Option<String>,
}

/// The principals' access, built from `[copilot.principals]`.
#[derive(Debug, Default)]
pub(crate) struct Access {
    /// Empty: every principal may use the gateway's token on any repository.
    principals: BTreeMap<String, Grant>,
}

#[derive(Debug)]
struct Grant {
    repositories: Vec<String>,
    /// The principal's own client, or why it has none it was meant to have.
    github: Option<Result<GitHub, String>>,
}

/// Checks `[copilot.principals]`: patterns well formed, token variables
/// set. `env` reads the environment.
pub(crate) fn check(
    principals: &BTreeMap<String, PrincipalAccess>,
    env: impl Fn(&str) -> Option<String>,
) -> Result<(), String> {
    for (principal, access) in principals {
        for (i, pattern) in access.repositories.iter().enumerate() {
            check_pattern(pattern).map_err(|why| {
                format!("copilot.principals.\"{principal}\".repositories[{i}] {pattern:?}: {why}")
            })?;
        }
        if let Some(name) = &access.token_env
            && env(name).is_none_or(|v| v.trim().is_empty())
        {
            return Err(format!(
                "copilot.principals.\"{principal}\".token_env names {name}, which is not set: \
                 set it to the principal's GitHub token, or remove token_env to use the \
                 gateway's token"
            ));
        }
    }
    Ok(())
}

fn check_pattern(pattern: &str) -> Result<(), &'static str> {
    let Some((owner, repo)) = pattern.split_once('/') else {
        return Err("expected owner/repo, e.g. \"octo-org/app\" or \"octo-org/*\"");
    };
    for part in [owner, repo] {
        let name = part.strip_suffix('*').unwrap_or(part);
        if name.contains('*') {
            return Err("`*` may only end the owner or the repository name");
        }
        if part.is_empty() || part.contains('/') {
            return Err("expected owner/repo, e.g. \"octo-org/app\" or \"octo-org/*\"");
        }
    }
    Ok(())
}

fn matches(pattern: &str, owner: &str, repo: &str) -> bool {
    let Some((p_owner, p_repo)) = pattern.split_once('/') else {
        return false;
    };
    part_matches(p_owner, owner) && part_matches(p_repo, repo)
}

fn part_matches(pattern: &str, name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    let pattern = pattern.to_ascii_lowercase();
    match pattern.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => name == pattern,
    }
}

impl Access {
    /// The access `principals` grant; each principal's own client is
    /// `gateway`'s with its token (read through `env`).
    pub(crate) fn new(
        principals: &BTreeMap<String, PrincipalAccess>,
        gateway: &GitHub,
        env: impl Fn(&str) -> Option<String>,
    ) -> Self {
        let principals = principals
            .iter()
            .map(|(principal, access)| {
                let github = access.token_env.as_ref().map(|name| {
                    env(name)
                        .map(|t| t.trim().to_owned())
                        .filter(|t| !t.is_empty())
                        .map(|t| gateway.with_token(Token::new(t)))
                        .ok_or_else(|| {
                            format!(
                                "Error: the GitHub token of your principal is not available \
                                 (copilot.principals.\"{principal}\".token_env names {name}, \
                                 which is not set); ask the operator to set it"
                            )
                        })
                });
                let grant = Grant {
                    repositories: access.repositories.clone(),
                    github,
                };
                (principal.clone(), grant)
            })
            .collect();
        Self { principals }
    }

    /// How many principals have a GitHub token of their own.
    pub(crate) fn principals_with_tokens(&self) -> usize {
        self.principals
            .values()
            .filter(|grant| matches!(grant.github, Some(Ok(_))))
            .count()
    }

    /// The client `principal` uses on `owner/repo`, or the tool error that
    /// refuses it (before any request to GitHub).
    pub(crate) fn github_for<'a>(
        &'a self,
        gateway: &'a GitHub,
        principal: &Owner,
        owner: &str,
        repo: &str,
    ) -> Result<&'a GitHub, String> {
        if self.principals.is_empty() {
            return Ok(gateway);
        }
        let who = principal.as_str();
        let Some(grant) = self.principals.get(who) else {
            return Err(format!(
                "Error: your principal ({who}) may not use the Copilot tools on this gateway: \
                 it has no [copilot.principals.\"{who}\"] entry. Ask the operator to add one \
                 listing the repositories you need."
            ));
        };
        if !grant
            .repositories
            .iter()
            .any(|pattern| matches(pattern, owner, repo))
        {
            return Err(format!(
                "Error: repository {owner}/{repo} is not one your principal may use: add it to \
                 copilot.principals.\"{who}\".repositories (ask the operator). Nothing was sent \
                 to GitHub."
            ));
        }
        match &grant.github {
            None => Ok(gateway),
            Some(Ok(github)) => Ok(github),
            Some(Err(why)) => Err(why.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::Endpoint;

    fn gateway() -> GitHub {
        GitHub::new(Endpoint::new("http://127.0.0.1:9", Some(Token::new("pat"))).expect("url"))
    }

    fn config() -> BTreeMap<String, PrincipalAccess> {
        BTreeMap::from([
            (
                "token:alice".to_owned(),
                PrincipalAccess {
                    repositories: vec!["Octo-Org/app".into(), "octo-org/docs-*".into()],
                    token_env: Some("ALICE_GH".into()),
                },
            ),
            (
                "token:bob".to_owned(),
                PrincipalAccess {
                    repositories: vec!["bob/*".into()],
                    token_env: None,
                },
            ),
        ])
    }

    fn env(name: &str) -> Option<String> {
        (name == "ALICE_GH").then(|| "alice-token".to_owned())
    }

    #[test]
    fn without_principals_everyone_uses_the_gateways_token() {
        let gateway = gateway();
        let access = Access::new(&BTreeMap::new(), &gateway, env);
        let github = access
            .github_for(&gateway, &Owner::new("token:anyone"), "o", "r")
            .expect("open");
        assert!(std::ptr::eq(github, &gateway));
    }

    #[test]
    fn a_principal_reaches_its_repositories_with_its_own_token() {
        let gateway = gateway();
        let access = Access::new(&config(), &gateway, env);
        let alice = Owner::new("token:alice");
        for (owner, repo) in [
            ("octo-org", "app"),
            ("OCTO-ORG", "App"),
            ("octo-org", "docs-api"),
        ] {
            let github = access
                .github_for(&gateway, &alice, owner, repo)
                .expect("allowed");
            assert_eq!(
                github.endpoint().token.as_ref().map(Token::expose),
                Some("alice-token"),
                "{owner}/{repo}"
            );
        }
        let bob = access
            .github_for(&gateway, &Owner::new("token:bob"), "bob", "x")
            .expect("bob");
        assert!(std::ptr::eq(bob, &gateway), "no token_env: the gateway's");
    }

    #[test]
    fn other_repositories_and_unlisted_principals_are_refused_by_name() {
        let gateway = gateway();
        let access = Access::new(&config(), &gateway, env);
        let err = access
            .github_for(&gateway, &Owner::new("token:alice"), "octo-org", "secrets")
            .expect_err("not listed");
        assert!(err.contains("octo-org/secrets"), "{err}");
        assert!(
            err.contains("copilot.principals.\"token:alice\".repositories"),
            "{err}"
        );
        let err = access
            .github_for(&gateway, &Owner::new("token:bob"), "octo-org", "app")
            .expect_err("not bob's");
        assert!(err.contains("octo-org/app"), "{err}");
        let err = access
            .github_for(&gateway, &Owner::new("token:mallory"), "bob", "x")
            .expect_err("unlisted");
        assert!(
            err.contains("[copilot.principals.\"token:mallory\"]"),
            "{err}"
        );
    }

    #[test]
    fn bad_patterns_and_unset_token_variables_are_refused_at_start() {
        let mut principals = config();
        check(&principals, env).expect("fine");
        principals.get_mut("token:bob").expect("bob").repositories = vec!["bob".into()];
        let err = check(&principals, env).expect_err("no slash");
        assert!(
            err.contains("copilot.principals.\"token:bob\".repositories[0]"),
            "{err}"
        );
        principals.get_mut("token:bob").expect("bob").repositories = vec!["b*b/x".into()];
        assert!(check(&principals, env).is_err());
        let mut principals = config();
        principals.get_mut("token:bob").expect("bob").token_env = Some("NOPE".into());
        let err = check(&principals, env).expect_err("unset");
        assert!(err.contains("token_env names NOPE"), "{err}");
    }
}
