//! The `[a2a]` section of the config file and its checks: which agents to
//! serve, how to authenticate to each, and how often to read their cards and
//! poll their tasks. Parsed with [`agentgate_backend::parse_section`]; every
//! table refuses unknown keys by name. [`AgentSettings::resolve`] turns one
//! entry into what the client needs (the bearer token read from its
//! environment variable), refusing what is wrong with the field and the fix.

use std::time::Duration;

use serde::Deserialize;

/// The config section's name.
pub const SECTION: &str = "a2a";

/// `[a2a]`: the remote A2A agents served as tools.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct A2aConfig {
    /// `[[a2a.agents]]`, one tool each.
    #[serde(default)]
    pub agents: Vec<AgentConfig>,
    /// How often each Agent Card is read again (0: only at start).
    #[serde(default = "default_refresh_seconds")]
    pub refresh_seconds: u64,
    /// How long a job waits between two `GetTask` polls of a working task
    /// (an agent may override it).
    #[serde(default = "default_poll_interval_ms")]
    pub poll_interval_ms: u64,
    /// Upper bound of one HTTP request to an agent.
    #[serde(default = "default_request_timeout_seconds")]
    pub request_timeout_seconds: u64,
}

impl Default for A2aConfig {
    fn default() -> Self {
        Self {
            agents: Vec::new(),
            refresh_seconds: default_refresh_seconds(),
            poll_interval_ms: default_poll_interval_ms(),
            request_timeout_seconds: default_request_timeout_seconds(),
        }
    }
}

fn default_refresh_seconds() -> u64 {
    300
}

fn default_poll_interval_ms() -> u64 {
    1_000
}

fn default_request_timeout_seconds() -> u64 {
    30
}

/// `[[a2a.agents]]`: one remote agent.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct AgentConfig {
    /// Names the agent's tool: `{name}_send_message`. Letters, digits, `_`
    /// and `-`, at most 64 characters.
    pub name: String,
    /// The agent's base URL (the card is then at
    /// `{url}/.well-known/agent-card.json`) or the URL of its card (a URL
    /// whose path ends in `.json`).
    pub url: String,
    /// The environment variable holding a bearer token, sent as
    /// `Authorization: Bearer …` on every JSON-RPC call. Never logged.
    #[serde(default)]
    pub token_env: Option<String>,
    /// OAuth 2.0 client credentials (not supported yet: refused at start).
    #[serde(default)]
    pub oauth: Option<OAuthConfig>,
    /// This agent's poll interval, overriding `[a2a] poll_interval_ms`.
    #[serde(default)]
    pub poll_interval_ms: Option<u64>,
}

/// `[a2a.agents.oauth]`: OAuth 2.0 client credentials for one agent.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct OAuthConfig {
    pub client_id: String,
    /// The environment variable holding the client secret.
    pub client_secret_env: String,
    /// The token endpoint; else the card's `oauth2SecurityScheme`'s.
    #[serde(default)]
    pub token_url: Option<String>,
    #[serde(default)]
    pub scopes: Vec<String>,
}

/// What is wrong with the `[a2a]` section beyond its shape.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("[a2a] {path}: {message}")]
pub struct SettingsError {
    /// The key path, e.g. `agents[1].token_env`.
    pub path: String,
    pub message: String,
}

impl SettingsError {
    fn new(path: String, message: impl Into<String>) -> Self {
        Self {
            path,
            message: message.into(),
        }
    }
}

/// A bearer token; `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct BearerToken(String);

impl BearerToken {
    pub fn new(token: impl Into<String>) -> Self {
        Self(token.into())
    }

    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for BearerToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BearerToken(<redacted>)")
    }
}

/// One agent, checked and ready to call.
#[derive(Debug, Clone)]
pub struct AgentSettings {
    pub name: String,
    /// The tool's name.
    pub tool_name: String,
    /// Where the card is read from.
    pub card_url: url::Url,
    pub token: Option<BearerToken>,
    pub poll_interval: Duration,
}

/// The whole section, checked.
#[derive(Debug, Clone)]
pub struct Settings {
    pub agents: Vec<AgentSettings>,
    /// `None`: the cards are read at start only.
    pub refresh: Option<Duration>,
    pub request_timeout: Duration,
}

impl A2aConfig {
    /// Checks the section and reads the token variables through `env`
    /// (`std::env::var` in production, a map in tests).
    pub fn resolve(&self, env: &dyn Fn(&str) -> Option<String>) -> Result<Settings, SettingsError> {
        let mut agents: Vec<AgentSettings> = Vec::new();
        for (i, agent) in self.agents.iter().enumerate() {
            let settings = agent.resolve(&format!("agents[{i}]"), self.poll_interval_ms, env)?;
            if agents.iter().any(|a| a.name == settings.name) {
                return Err(SettingsError::new(
                    format!("agents[{i}].name"),
                    format!(
                        "`{}` names two agents; give each agent its own name",
                        settings.name
                    ),
                ));
            }
            agents.push(settings);
        }
        if self.request_timeout_seconds == 0 {
            return Err(SettingsError::new(
                "request_timeout_seconds".into(),
                "must be at least 1",
            ));
        }
        Ok(Settings {
            agents,
            refresh: (self.refresh_seconds > 0).then(|| Duration::from_secs(self.refresh_seconds)),
            request_timeout: Duration::from_secs(self.request_timeout_seconds),
        })
    }
}

impl AgentConfig {
    fn resolve(
        &self,
        at: &str,
        default_poll_ms: u64,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<AgentSettings, SettingsError> {
        let name_ok = !self.name.is_empty()
            && self.name.len() <= 64
            && self
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !name_ok {
            return Err(SettingsError::new(
                format!("{at}.name"),
                format!(
                    "{:?} is not a valid tool name prefix: use 1 to 64 ASCII letters, digits, `_` or `-`",
                    self.name
                ),
            ));
        }
        let card_url = card_url(&self.url).map_err(|why| {
            SettingsError::new(
                format!("{at}.url"),
                format!("{:?} {why}; give the agent's http(s) base URL", self.url),
            )
        })?;
        if self.oauth.is_some() {
            return Err(SettingsError::new(
                format!("{at}.oauth"),
                "OAuth client credentials are not supported yet; use `token_env` with a token \
                 obtained out of band, or remove the agent",
            ));
        }
        let token = match &self.token_env {
            None => None,
            Some(var) => match env(var) {
                Some(token) if !token.trim().is_empty() => Some(BearerToken::new(token.trim())),
                _ => {
                    return Err(SettingsError::new(
                        format!("{at}.token_env"),
                        format!(
                            "the environment variable `{var}` is unset or empty; export the agent's bearer token in it"
                        ),
                    ));
                }
            },
        };
        let poll_ms = self.poll_interval_ms.unwrap_or(default_poll_ms);
        if poll_ms == 0 {
            return Err(SettingsError::new(
                format!("{at}.poll_interval_ms"),
                "must be at least 1",
            ));
        }
        Ok(AgentSettings {
            name: self.name.clone(),
            tool_name: format!("{}_send_message", self.name),
            card_url,
            token,
            poll_interval: Duration::from_millis(poll_ms),
        })
    }
}

/// The card's URL: `url` itself when its path ends in `.json`, else the
/// well-known path under it (§8.2).
fn card_url(raw: &str) -> Result<url::Url, String> {
    let url = url::Url::parse(raw).map_err(|e| format!("is not a URL ({e})"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!("has scheme `{}`", url.scheme()));
    }
    if url.path().ends_with(".json") {
        return Ok(url);
    }
    let mut base = url;
    if !base.path().ends_with('/') {
        let path = format!("{}/", base.path());
        base.set_path(&path);
    }
    base.join(".well-known/agent-card.json")
        .map_err(|e| format!("cannot hold the card path ({e})"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentgate_backend::parse_section;
    use serde_json::json;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn an_unknown_key_is_refused_by_its_path() {
        for (value, path) in [
            (json!({"agent": []}), "agent"),
            (
                json!({"agents": [{"name": "a", "url": "http://x", "token": "t"}]}),
                "agents[0].token",
            ),
            (
                json!({"agents": [{"name": "a", "url": "http://x",
                    "oauth": {"client_id": "c", "client_secret_env": "S", "secret": "s"}}]}),
                "agents[0].oauth.secret",
            ),
        ] {
            let e = parse_section::<A2aConfig>(SECTION, Some(value)).expect_err("unknown key");
            assert_eq!(e.path, path, "{e}");
            assert!(e.message.contains("unknown field"), "{e}");
        }
    }

    #[test]
    fn a_missing_section_has_no_agents_and_the_defaults() {
        let config: A2aConfig = parse_section(SECTION, None).expect("parses");
        assert_eq!(config, A2aConfig::default());
        let settings = config.resolve(&no_env).expect("resolves");
        assert!(settings.agents.is_empty());
        assert_eq!(settings.refresh, Some(Duration::from_secs(300)));
    }

    #[test]
    fn the_card_url_is_the_well_known_path_unless_a_json_url_is_given() {
        assert_eq!(
            card_url("http://h:1").expect("base").as_str(),
            "http://h:1/.well-known/agent-card.json"
        );
        assert_eq!(
            card_url("https://h/agents/x")
                .expect("base with path")
                .as_str(),
            "https://h/agents/x/.well-known/agent-card.json"
        );
        assert_eq!(
            card_url("https://h/cards/x.json").expect("card").as_str(),
            "https://h/cards/x.json"
        );
        assert!(card_url("ftp://h/").is_err());
        assert!(card_url("not a url").is_err());
    }

    fn one_agent(extra: serde_json::Value) -> A2aConfig {
        let mut agent = json!({"name": "helper", "url": "http://127.0.0.1:9/"});
        if let (Some(agent), Some(extra)) = (agent.as_object_mut(), extra.as_object()) {
            agent.extend(extra.clone());
        }
        parse_section(SECTION, Some(json!({ "agents": [agent] }))).expect("parses")
    }

    #[test]
    fn the_token_comes_from_its_variable_and_never_shows() {
        let config = one_agent(json!({"token_env": "HELPER_TOKEN"}));
        let env = |name: &str| (name == "HELPER_TOKEN").then(|| "s3cret-value".to_owned());
        let settings = config.resolve(&env).expect("resolves");
        let agent = &settings.agents[0];
        assert_eq!(agent.tool_name, "helper_send_message");
        assert_eq!(
            agent.token.as_ref().map(BearerToken::expose),
            Some("s3cret-value")
        );
        assert!(!format!("{settings:?}").contains("s3cret"), "{settings:?}");

        let e = config.resolve(&no_env).expect_err("unset variable");
        assert_eq!(e.path, "agents[0].token_env");
        assert!(e.message.contains("HELPER_TOKEN"), "{e}");
    }

    #[test]
    fn oauth_is_refused_as_not_supported_yet() {
        let config = one_agent(json!({"oauth": {"client_id": "c", "client_secret_env": "S"}}));
        let e = config.resolve(&no_env).expect_err("oauth");
        assert_eq!(e.path, "agents[0].oauth");
        assert!(e.message.contains("not supported yet"), "{e}");
    }

    #[test]
    fn bad_names_urls_and_duplicates_are_refused_by_field() {
        let e = one_agent(json!({"name": "has space"}))
            .resolve(&no_env)
            .expect_err("name");
        assert_eq!(e.path, "agents[0].name");
        let e = one_agent(json!({"url": "mailto:x@y"}))
            .resolve(&no_env)
            .expect_err("url");
        assert_eq!(e.path, "agents[0].url");
        let e = one_agent(json!({"poll_interval_ms": 0}))
            .resolve(&no_env)
            .expect_err("poll");
        assert_eq!(e.path, "agents[0].poll_interval_ms");
        let twice: A2aConfig = parse_section(
            SECTION,
            Some(json!({"agents": [
                {"name": "a", "url": "http://x"}, {"name": "a", "url": "http://y"}
            ]})),
        )
        .expect("parses");
        let e = twice.resolve(&no_env).expect_err("duplicate");
        assert_eq!(e.path, "agents[1].name");
    }
}
