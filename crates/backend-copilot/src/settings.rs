//! Where the tools find GitHub, and the knobs of the watch.
//!
//! | variable | meaning |
//! |---|---|
//! | `GITHUB_PERSONAL_ACCESS_TOKEN` | required: a user token (as github-mcp-server) |
//! | `GITHUB_API_URL` | optional: the REST root, default `https://api.github.com`; GitHub Enterprise Server is `https://HOST/api/v3` |
//!
//! GraphQL lives at `https://api.github.com/graphql` on github.com and at
//! `https://HOST/api/graphql` on GitHub Enterprise Server; any other root (the
//! emulator) gets `<root>/graphql`.
//!
//! The knobs come from the `[copilot]` table of agentgate's config file.

use std::time::Duration;

use serde::Deserialize;
use url::Url;

/// The default REST root.
pub(crate) const DEFAULT_API_URL: &str = "https://api.github.com";

/// A GitHub token. It is only ever written into an `Authorization` header:
/// `Debug` and `Display` print `<redacted>`.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(String);

impl Token {
    pub fn new(token: impl Into<String>) -> Self {
        Self(token.into())
    }

    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

/// Where GitHub is and who we are there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// The REST root, always ending in `/`.
    pub rest: Url,
    pub graphql: Url,
    /// `None` when `GITHUB_PERSONAL_ACCESS_TOKEN` is not set: the tools are
    /// listed anyway and say what to set when called.
    pub token: Option<Token>,
}

/// A setting that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SettingsError {
    #[error(
        "GITHUB_API_URL `{value}` is not a usable URL ({reason}); expected e.g. \
         https://api.github.com or https://github.example.com/api/v3"
    )]
    BadApiUrl { value: String, reason: String },
}

impl Endpoint {
    /// Reads `GITHUB_API_URL` and `GITHUB_PERSONAL_ACCESS_TOKEN`.
    pub fn from_env() -> Result<Self, SettingsError> {
        let api = std::env::var("GITHUB_API_URL")
            .ok()
            .filter(|v| !v.trim().is_empty())
            .unwrap_or_else(|| DEFAULT_API_URL.to_owned());
        let token = std::env::var("GITHUB_PERSONAL_ACCESS_TOKEN")
            .ok()
            .map(|t| t.trim().to_owned())
            .filter(|t| !t.is_empty())
            .map(Token::new);
        Self::new(api.trim(), token)
    }

    /// The endpoint for a REST root (see the module docs for GraphQL's URL).
    pub fn new(api_url: &str, token: Option<Token>) -> Result<Self, SettingsError> {
        let bad = |reason: &str| SettingsError::BadApiUrl {
            value: api_url.to_owned(),
            reason: reason.to_owned(),
        };
        let mut rest = Url::parse(api_url).map_err(|e| bad(&e.to_string()))?;
        if !matches!(rest.scheme(), "http" | "https") {
            return Err(bad(
                "the scheme must be https (or http for a local emulator)",
            ));
        }
        if rest.host_str().is_none() {
            return Err(bad("there is no host"));
        }
        if rest.query().is_some() || rest.fragment().is_some() {
            return Err(bad("a query or fragment is not allowed"));
        }
        if !rest.path().ends_with('/') {
            let path = format!("{}/", rest.path());
            rest.set_path(&path);
        }
        let graphql_path = if rest.path().ends_with("/api/v3/") {
            format!("{}graphql", rest.path().trim_end_matches("v3/"))
        } else {
            format!("{}graphql", rest.path())
        };
        let mut graphql = rest.clone();
        graphql.set_path(&graphql_path);
        Ok(Self {
            rest,
            graphql,
            token,
        })
    }
}

/// The `[copilot]` table of the config file.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CopilotConfig {
    /// On cancel, also remove Copilot from the assignees. GitHub has
    /// no API to stop an agent session, so this is the closest thing.
    pub unassign_on_cancel: bool,
    /// Stop watching (and end the task as an error saying so) after this long.
    pub max_watch_minutes: u64,
    /// The first poll interval; it doubles every `poll_grow_seconds`.
    pub poll_min_ms: u64,
    pub poll_grow_seconds: u64,
    /// The longest poll interval.
    pub poll_max_seconds: u64,
    /// Per principal: the repositories it may touch and its own token (see
    /// [`crate::access`]). Empty: every principal may use the gateway's
    /// token on every repository it reaches.
    pub principals: std::collections::BTreeMap<String, crate::access::PrincipalAccess>,
}

impl Default for CopilotConfig {
    fn default() -> Self {
        Self {
            unassign_on_cancel: false,
            max_watch_minutes: 180,
            poll_min_ms: 1000,
            poll_grow_seconds: 15,
            poll_max_seconds: 32,
            principals: std::collections::BTreeMap::new(),
        }
    }
}

impl CopilotConfig {
    pub fn max_watch(&self) -> Duration {
        Duration::from_secs(self.max_watch_minutes.saturating_mul(60))
    }

    /// Checks the values, naming the key and the fix.
    pub fn validate(&self) -> Result<(), String> {
        if self.max_watch_minutes == 0 {
            return Err("copilot.max_watch_minutes must be at least 1".into());
        }
        if self.poll_min_ms < 100 {
            return Err(
                "copilot.poll_min_ms must be at least 100 (GitHub asks clients not to poll hard)"
                    .into(),
            );
        }
        if self.poll_max_seconds.saturating_mul(1000) < self.poll_min_ms {
            return Err("copilot.poll_max_seconds must not be below copilot.poll_min_ms".into());
        }
        if self.poll_grow_seconds == 0 {
            return Err("copilot.poll_grow_seconds must be at least 1".into());
        }
        crate::access::check(&self.principals, |name| std::env::var(name).ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn graphql_url_follows_the_deployment() {
        let dotcom = Endpoint::new("https://api.github.com", None).expect("url");
        assert_eq!(dotcom.rest.as_str(), "https://api.github.com/");
        assert_eq!(dotcom.graphql.as_str(), "https://api.github.com/graphql");
        let ghes = Endpoint::new("https://ghe.example.com/api/v3", None).expect("url");
        assert_eq!(ghes.rest.as_str(), "https://ghe.example.com/api/v3/");
        assert_eq!(ghes.graphql.as_str(), "https://ghe.example.com/api/graphql");
        let sim = Endpoint::new("http://127.0.0.1:8732", None).expect("url");
        assert_eq!(sim.graphql.as_str(), "http://127.0.0.1:8732/graphql");
    }

    #[test]
    fn bad_api_urls_are_refused_with_the_reason() {
        for (url, reason) in [
            ("api.github.com", "relative URL"),
            ("ftp://x", "scheme"),
            ("https://api.github.com/?a=1", "query"),
        ] {
            let err = Endpoint::new(url, None).expect_err(url).to_string();
            assert!(
                err.contains("GITHUB_API_URL") && err.contains(reason),
                "{err}"
            );
        }
    }

    #[test]
    fn token_is_never_printed() {
        let token = Token::new("ghp_secret123");
        let endpoint = Endpoint::new(DEFAULT_API_URL, Some(token)).expect("url");
        assert!(!format!("{endpoint:?}").contains("ghp_secret123"));
    }
}
