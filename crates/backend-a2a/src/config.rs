//! The `[a2a]` section of the config file and its checks: which agents to
//! serve, how to authenticate to each (a bearer token or OAuth client
//! credentials, the secret read from an environment variable), how to follow
//! their tasks (polling, streams, push notifications) and how often to read
//! their cards. Parsed with [`agentgate_backend::parse_section`]; every table
//! refuses unknown keys by name. [`A2aConfig::resolve`] turns it into
//! [`Settings`], refusing what is wrong with the field and the fix.

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
    /// How long a job first waits between two `GetTask` polls of a working
    /// task; the wait doubles every minute of the task's age up to
    /// `max_poll_interval_ms`.
    #[serde(default = "default_poll_interval_ms")]
    pub poll_interval_ms: u64,
    /// The longest wait between two reads of a task: the polling interval's
    /// cap, and the safety read of a task followed by a stream or push.
    #[serde(default = "default_max_poll_interval_ms")]
    pub max_poll_interval_ms: u64,
    /// Upper bound of one HTTP request to an agent.
    #[serde(default = "default_request_timeout_seconds")]
    pub request_timeout_seconds: u64,
    /// `SubscribeToTask` streams this process holds open at once, over all
    /// agents (0: never stream). Tasks beyond it are polled.
    #[serde(default = "default_max_streams")]
    pub max_streams: usize,
    /// The public URL at which agents reach this backend's push endpoint
    /// (`/hooks/a2a` on agentgate's HTTP server), e.g.
    /// `https://gw.example.com/hooks/a2a`. Unset: no push notifications.
    #[serde(default)]
    pub push_url: Option<String>,
    /// The environment variable holding the secret that push tokens are
    /// derived from (the same on every instance). Required with `push_url`.
    #[serde(default)]
    pub push_secret_env: Option<String>,
    /// How long a client without the tasks extension waits inline before it
    /// gets the task id to follow.
    #[serde(default = "default_sync_budget_seconds")]
    pub sync_budget_seconds: u64,
}

impl Default for A2aConfig {
    fn default() -> Self {
        Self {
            agents: Vec::new(),
            refresh_seconds: default_refresh_seconds(),
            poll_interval_ms: default_poll_interval_ms(),
            max_poll_interval_ms: default_max_poll_interval_ms(),
            request_timeout_seconds: default_request_timeout_seconds(),
            max_streams: default_max_streams(),
            push_url: None,
            push_secret_env: None,
            sync_budget_seconds: default_sync_budget_seconds(),
        }
    }
}

fn default_refresh_seconds() -> u64 {
    300
}

fn default_poll_interval_ms() -> u64 {
    1_000
}

fn default_max_poll_interval_ms() -> u64 {
    30_000
}

fn default_request_timeout_seconds() -> u64 {
    30
}

fn default_max_streams() -> usize {
    32
}

fn default_sync_budget_seconds() -> u64 {
    60
}

fn yes() -> bool {
    true
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
    /// OAuth 2.0 client credentials, for an agent whose card asks for them.
    #[serde(default)]
    pub oauth: Option<OAuthConfig>,
    /// This agent's first poll interval, overriding `[a2a] poll_interval_ms`.
    #[serde(default)]
    pub poll_interval_ms: Option<u64>,
    /// Start each call in a contextId agentgate chooses, so a step repeated
    /// after a crash finds the task it started (`ListTasks`) instead of
    /// sending again. Only for agents that accept client-chosen contextIds
    /// (§3.4.1 says a client SHOULD NOT send one otherwise).
    #[serde(default)]
    pub client_context_ids: bool,
    /// Follow this agent's tasks with `SubscribeToTask` streams when its card
    /// says `capabilities.streaming` (false: poll).
    #[serde(default = "yes")]
    pub streaming: bool,
    /// Ask this agent for push notifications when `[a2a] push_url` is set and
    /// its card says `capabilities.pushNotifications`.
    #[serde(default = "yes")]
    pub push: bool,
    /// Origins (`https://host[:port]`) besides the card URL's where the
    /// card's JSON-RPC interface may be. Default: none — a card naming an
    /// endpoint on another origin is refused.
    #[serde(default)]
    pub allowed_endpoints: Vec<String>,
    /// Take a plain-http OAuth token URL from the card (same origin as the
    /// card URL). Default false: https only, unless the card URL is
    /// loopback.
    #[serde(default)]
    pub allow_http: bool,
    /// Reach private (RFC 1918, ULA), loopback and link-local addresses.
    /// Default false: only when the card URL is itself such an address.
    #[serde(default)]
    pub allow_private_network: bool,
    /// The principals (`token:alice`, `oauth:<iss>#<sub>`, `local:<user>`)
    /// that may call this agent's tool. Unset: every principal.
    #[serde(default)]
    pub principals: Option<Vec<String>>,
    /// A bearer token per principal: principal → the environment variable
    /// holding that principal's own token at this agent. A listed principal's
    /// calls carry its token (the agent sees that person); everyone else's
    /// carry the agent's `token_env` or `[oauth]` credentials.
    #[serde(default)]
    pub principal_tokens: std::collections::BTreeMap<String, String>,
}

/// `[a2a.agents.oauth]`: OAuth 2.0 client credentials for one agent (RFC
/// 6749 §4.4).
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct OAuthConfig {
    pub client_id: String,
    /// The environment variable holding the client secret.
    pub client_secret_env: String,
    /// The token endpoint. Unset: the card's client-credentials flow's
    /// `tokenUrl`, only when it shares the card URL's origin and is https
    /// (see `guard.rs`). Set: a card naming another is refused.
    #[serde(default)]
    pub token_url: Option<String>,
    /// The scopes to ask for. A card whose `securityRequirements` name a
    /// scope not listed here is refused.
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

/// A secret (a bearer token, a client secret, the push secret); `Debug`
/// never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(secret: impl Into<String>) -> Self {
        Self(secret.into())
    }

    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// A bearer token.
pub type BearerToken = Secret;

/// How agentgate authenticates to one agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credentials {
    None,
    /// A fixed bearer token.
    Bearer(Secret),
    /// OAuth 2.0 client credentials.
    OAuth(OAuthSettings),
}

/// OAuth client credentials, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuthSettings {
    pub client_id: String,
    pub client_secret: Secret,
    /// Where the secret came from, for messages.
    pub client_secret_env: String,
    /// `None`: the card's.
    pub token_url: Option<url::Url>,
    pub scopes: Vec<String>,
}

/// One agent, checked and ready to call.
#[derive(Debug, Clone)]
pub struct AgentSettings {
    pub name: String,
    /// The tool's name.
    pub tool_name: String,
    /// Where the card is read from.
    pub card_url: url::Url,
    pub credentials: Credentials,
    /// The first interval between polls.
    pub poll_interval: Duration,
    pub client_context_ids: bool,
    pub streaming: bool,
    pub push: bool,
    /// Origins besides the card's where its JSON-RPC endpoint may be.
    pub allowed_endpoints: Vec<url::Origin>,
    pub allow_http: bool,
    pub allow_private_network: bool,
    /// Who may call it (`None`: everyone).
    pub principals: Option<Vec<String>>,
    /// Principals with a bearer token of their own at this agent.
    pub principal_tokens: std::collections::BTreeMap<String, Secret>,
    /// Its path in the config, for messages (`agents[0]`).
    pub at: String,
}

/// Push notifications, checked.
#[derive(Clone)]
pub struct PushSettings {
    /// Agents POST to `{base}/{task id}`.
    pub base: url::Url,
    pub secret: Secret,
}

impl std::fmt::Debug for PushSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PushSettings")
            .field("base", &self.base.as_str())
            .field("secret", &self.secret)
            .finish()
    }
}

/// The whole section, checked.
#[derive(Debug, Clone)]
pub struct Settings {
    pub agents: Vec<AgentSettings>,
    /// `None`: the cards are read at start only.
    pub refresh: Option<Duration>,
    pub request_timeout: Duration,
    pub max_poll_interval: Duration,
    pub max_streams: usize,
    pub push: Option<PushSettings>,
    pub sync_budget: Duration,
}

/// The shortest push secret taken: the tokens are HMACs keyed by it.
const MIN_PUSH_SECRET: usize = 32;

impl A2aConfig {
    /// Checks the section and reads the secret variables through `env`
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
        if self.poll_interval_ms == 0 {
            return Err(SettingsError::new(
                "poll_interval_ms".into(),
                "must be at least 1",
            ));
        }
        if self.max_poll_interval_ms < self.poll_interval_ms {
            return Err(SettingsError::new(
                "max_poll_interval_ms".into(),
                format!(
                    "{} is below poll_interval_ms ({}); the cap must be at least the first interval",
                    self.max_poll_interval_ms, self.poll_interval_ms
                ),
            ));
        }
        if self.sync_budget_seconds == 0 {
            return Err(SettingsError::new(
                "sync_budget_seconds".into(),
                "must be at least 1",
            ));
        }
        let push = self.resolve_push(env)?;
        Ok(Settings {
            agents,
            refresh: (self.refresh_seconds > 0).then(|| Duration::from_secs(self.refresh_seconds)),
            request_timeout: Duration::from_secs(self.request_timeout_seconds),
            max_poll_interval: Duration::from_millis(self.max_poll_interval_ms),
            max_streams: self.max_streams,
            push,
            sync_budget: Duration::from_secs(self.sync_budget_seconds),
        })
    }

    fn resolve_push(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Option<PushSettings>, SettingsError> {
        let (url, var) = match (&self.push_url, &self.push_secret_env) {
            (None, None) => return Ok(None),
            (Some(_), None) => {
                return Err(SettingsError::new(
                    "push_secret_env".into(),
                    "is required with push_url: name an environment variable holding a random \
                     secret of at least 32 characters, the same on every instance",
                ));
            }
            (None, Some(_)) => {
                return Err(SettingsError::new(
                    "push_url".into(),
                    "is required with push_secret_env: give the public URL of agentgate's \
                     /hooks/a2a endpoint, e.g. https://gw.example.com/hooks/a2a",
                ));
            }
            (Some(url), Some(var)) => (url, var),
        };
        let base = url::Url::parse(url)
            .ok()
            .filter(|u| {
                matches!(u.scheme(), "http" | "https")
                    && u.query().is_none()
                    && u.fragment().is_none()
                    && u.has_host()
            })
            .ok_or_else(|| {
                SettingsError::new(
                    "push_url".into(),
                    format!(
                        "{url:?} is not an http(s) URL without query or fragment; give the public \
                         URL of agentgate's /hooks/a2a endpoint"
                    ),
                )
            })?;
        let secret = match env(var) {
            Some(secret) if secret.trim().len() >= MIN_PUSH_SECRET => Secret::new(secret.trim()),
            Some(_) => {
                return Err(SettingsError::new(
                    "push_secret_env".into(),
                    format!(
                        "the secret in `{var}` is shorter than {MIN_PUSH_SECRET} characters; use \
                         a random one, e.g. `openssl rand -hex 32`"
                    ),
                ));
            }
            None => {
                return Err(SettingsError::new(
                    "push_secret_env".into(),
                    format!(
                        "the environment variable `{var}` is unset; export the push secret in it"
                    ),
                ));
            }
        };
        Ok(Some(PushSettings { base, secret }))
    }
}

/// A secret read from environment variable `var`, or the error naming
/// `field` and the fix.
fn secret_from(
    env: &dyn Fn(&str) -> Option<String>,
    var: &str,
    field: String,
    what: &str,
) -> Result<Secret, SettingsError> {
    match env(var) {
        Some(value) if !value.trim().is_empty() => Ok(Secret::new(value.trim())),
        _ => Err(SettingsError::new(
            field,
            format!("the environment variable `{var}` is unset or empty; export {what} in it"),
        )),
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
        let credentials = match (&self.token_env, &self.oauth) {
            (Some(_), Some(_)) => {
                return Err(SettingsError::new(
                    format!("{at}.oauth"),
                    "an agent takes one way to authenticate: `token_env` or `[oauth]`, not both",
                ));
            }
            (None, None) => Credentials::None,
            (Some(var), None) => Credentials::Bearer(secret_from(
                env,
                var,
                format!("{at}.token_env"),
                "the agent's bearer token",
            )?),
            (None, Some(oauth)) => Credentials::OAuth(oauth.resolve(&format!("{at}.oauth"), env)?),
        };
        let mut allowed_endpoints = Vec::new();
        for (j, raw) in self.allowed_endpoints.iter().enumerate() {
            let origin = url::Url::parse(raw)
                .ok()
                .filter(|u| {
                    matches!(u.scheme(), "http" | "https")
                        && u.has_host()
                        && u.path() == "/"
                        && u.query().is_none()
                        && u.fragment().is_none()
                        && u.username().is_empty()
                        && u.password().is_none()
                })
                .ok_or_else(|| {
                    SettingsError::new(
                        format!("{at}.allowed_endpoints[{j}]"),
                        format!(
                            "{raw:?} is not an origin; give scheme, host and port only, e.g. \
                             \"https://rpc.example.com\""
                        ),
                    )
                })?
                .origin();
            allowed_endpoints.push(origin);
        }
        if let Some(principals) = &self.principals
            && let Some(i) = principals.iter().position(|p| p.trim().is_empty())
        {
            return Err(SettingsError::new(
                format!("{at}.principals[{i}]"),
                "is empty; name a principal as its tasks are owned, e.g. \"token:alice\"",
            ));
        }
        let mut principal_tokens = std::collections::BTreeMap::new();
        for (principal, var) in &self.principal_tokens {
            let path = format!("{at}.principal_tokens.\"{principal}\"");
            if principal.trim().is_empty() {
                return Err(SettingsError::new(
                    path,
                    "names no principal; use the principal as its tasks are owned, e.g. \
                     \"token:alice\"",
                ));
            }
            // A token for someone who may not call the agent is a typo or
            // a leftover: either way, not what the operator meant.
            if let Some(allowed) = &self.principals
                && !allowed.contains(principal)
            {
                return Err(SettingsError::new(
                    path,
                    format!(
                        "{principal:?} has a token here but is not in {at}.principals, so it \
                         may not call this agent; add it there or remove its token"
                    ),
                ));
            }
            let token = secret_from(env, var, path, "the principal's bearer token at the agent")?;
            principal_tokens.insert(principal.clone(), token);
        }
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
            credentials,
            poll_interval: Duration::from_millis(poll_ms),
            client_context_ids: self.client_context_ids,
            streaming: self.streaming,
            push: self.push,
            allowed_endpoints,
            allow_http: self.allow_http,
            allow_private_network: self.allow_private_network,
            principals: self.principals.clone(),
            principal_tokens,
            at: at.to_owned(),
        })
    }
}

impl OAuthConfig {
    fn resolve(
        &self,
        at: &str,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<OAuthSettings, SettingsError> {
        if self.client_id.trim().is_empty() {
            return Err(SettingsError::new(
                format!("{at}.client_id"),
                "is empty; give the client id the agent's authorization server issued",
            ));
        }
        let token_url = match &self.token_url {
            None => None,
            Some(raw) => Some(
                url::Url::parse(raw)
                    .ok()
                    .filter(|u| matches!(u.scheme(), "http" | "https"))
                    .ok_or_else(|| {
                        SettingsError::new(
                            format!("{at}.token_url"),
                            format!(
                                "{raw:?} is not an http(s) URL; give the authorization server's \
                                 token endpoint, or leave it out to use the card's"
                            ),
                        )
                    })?,
            ),
        };
        if let Some(bad) = self.scopes.iter().find(|s| s.is_empty() || s.contains(' ')) {
            return Err(SettingsError::new(
                format!("{at}.scopes"),
                format!("{bad:?} is not one scope (RFC 6749 §3.3: no spaces, not empty)"),
            ));
        }
        let client_secret = secret_from(
            env,
            &self.client_secret_env,
            format!("{at}.client_secret_env"),
            "the OAuth client secret",
        )?;
        Ok(OAuthSettings {
            client_id: self.client_id.clone(),
            client_secret,
            client_secret_env: self.client_secret_env.clone(),
            token_url,
            scopes: self.scopes.clone(),
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
            (
                json!({"agents": [{"name": "a", "url": "http://x", "allow_private": true}]}),
                "agents[0].allow_private",
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
    fn a_principals_own_token_is_read_checked_and_never_shown() {
        let env = |name: &str| (name == "ALICE_AT_HELPER").then(|| "alice-s3cret".to_owned());
        let config = one_agent(json!({"principal_tokens": {"token:alice": "ALICE_AT_HELPER"}}));
        let settings = config.resolve(&env).expect("resolves");
        assert_eq!(
            settings.agents[0].principal_tokens.get("token:alice"),
            Some(&Secret::new("alice-s3cret"))
        );
        assert!(!format!("{settings:?}").contains("alice-s3cret"));

        let e = config.resolve(&no_env).expect_err("unset variable");
        assert_eq!(e.path, "agents[0].principal_tokens.\"token:alice\"");
        assert!(e.message.contains("ALICE_AT_HELPER"), "{e}");

        // A token for a principal that may not call the agent is refused.
        let config = one_agent(json!({
            "principals": ["token:bob"],
            "principal_tokens": {"token:alice": "ALICE_AT_HELPER"},
        }));
        let e = config.resolve(&env).expect_err("not allowed");
        assert_eq!(e.path, "agents[0].principal_tokens.\"token:alice\"");
        assert!(e.message.contains("agents[0].principals"), "{e}");
    }

    #[test]
    fn the_token_comes_from_its_variable_and_never_shows() {
        let config = one_agent(json!({"token_env": "HELPER_TOKEN"}));
        let env = |name: &str| (name == "HELPER_TOKEN").then(|| "s3cret-value".to_owned());
        let settings = config.resolve(&env).expect("resolves");
        let agent = &settings.agents[0];
        assert_eq!(agent.tool_name, "helper_send_message");
        assert_eq!(
            agent.credentials,
            Credentials::Bearer(Secret::new("s3cret-value"))
        );
        assert!(!format!("{settings:?}").contains("s3cret"), "{settings:?}");

        let e = config.resolve(&no_env).expect_err("unset variable");
        assert_eq!(e.path, "agents[0].token_env");
        assert!(e.message.contains("HELPER_TOKEN"), "{e}");
    }

    #[test]
    fn oauth_reads_its_secret_from_the_variable_and_never_shows_it() {
        let config = one_agent(json!({"oauth": {
            "client_id": "agentgate", "client_secret_env": "HELPER_SECRET",
            "token_url": "https://idp.example/token", "scopes": ["a2a.invoke"]}}));
        let env = |name: &str| (name == "HELPER_SECRET").then(|| "client-s3cret".to_owned());
        let settings = config.resolve(&env).expect("resolves");
        match &settings.agents[0].credentials {
            Credentials::OAuth(oauth) => {
                assert_eq!(oauth.client_id, "agentgate");
                assert_eq!(oauth.client_secret.expose(), "client-s3cret");
                assert_eq!(
                    oauth.token_url.as_ref().map(url::Url::as_str),
                    Some("https://idp.example/token")
                );
                assert_eq!(oauth.scopes, ["a2a.invoke"]);
            }
            other => panic!("expected OAuth, got {other:?}"),
        }
        assert!(!format!("{settings:?}").contains("client-s3cret"));

        let e = config.resolve(&no_env).expect_err("unset secret");
        assert_eq!(e.path, "agents[0].oauth.client_secret_env");
        assert!(e.message.contains("HELPER_SECRET"), "{e}");
        let both = one_agent(json!({"token_env": "T",
            "oauth": {"client_id": "c", "client_secret_env": "S"}}));
        assert_eq!(
            both.resolve(&env).expect_err("both").path,
            "agents[0].oauth"
        );
        let bad_url = one_agent(json!({"oauth": {"client_id": "c",
            "client_secret_env": "HELPER_SECRET", "token_url": "ftp://x"}}));
        assert_eq!(
            bad_url.resolve(&env).expect_err("url").path,
            "agents[0].oauth.token_url"
        );
    }

    #[test]
    fn push_needs_a_url_and_a_long_secret_together() {
        let section = |extra: serde_json::Value| -> A2aConfig {
            parse_section(SECTION, Some(extra)).expect("parses")
        };
        let secret = |name: &str| {
            (name == "PUSH_SECRET").then(|| "0123456789abcdef0123456789abcdef".to_owned())
        };
        let short = |_: &str| Some("short".to_owned());
        let ok = section(json!({"push_url": "https://gw.example/hooks/a2a",
            "push_secret_env": "PUSH_SECRET"}));
        let push = ok.resolve(&secret).expect("resolves").push.expect("push");
        assert_eq!(push.base.as_str(), "https://gw.example/hooks/a2a");
        assert!(!format!("{push:?}").contains("0123456789"), "{push:?}");
        assert_eq!(
            ok.resolve(&short).expect_err("short").path,
            "push_secret_env"
        );
        assert_eq!(
            section(json!({"push_url": "https://gw.example/hooks/a2a"}))
                .resolve(&secret)
                .expect_err("no secret")
                .path,
            "push_secret_env"
        );
        assert_eq!(
            section(json!({"push_url": "gw.example", "push_secret_env": "PUSH_SECRET"}))
                .resolve(&secret)
                .expect_err("bad url")
                .path,
            "push_url"
        );
        assert_eq!(
            section(json!({"max_poll_interval_ms": 10, "poll_interval_ms": 100}))
                .resolve(&no_env)
                .expect_err("cap below start")
                .path,
            "max_poll_interval_ms"
        );
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
        let e = one_agent(json!({"allowed_endpoints": ["https://ok.example", "https://x/path"]}))
            .resolve(&no_env)
            .expect_err("a path is not an origin");
        assert_eq!(e.path, "agents[0].allowed_endpoints[1]");
        let listed = one_agent(json!({"allowed_endpoints": ["https://rpc.example:8443"],
            "allow_http": true, "allow_private_network": true}))
        .resolve(&no_env)
        .expect("origins");
        let agent = &listed.agents[0];
        assert_eq!(
            agent.allowed_endpoints,
            [url::Url::parse("https://rpc.example:8443")
                .expect("url")
                .origin()]
        );
        assert!(agent.allow_http && agent.allow_private_network);
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
