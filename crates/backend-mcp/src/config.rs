//! The `[mcp]` section: which MCP servers to serve, how to reach each, and
//! the limits on its calls.
//!
//! ```toml
//! [[mcp.servers]]
//! name = "everything"                 # names the server in errors, metrics and logs
//! command = "npx"                     # a stdio server, run once per call …
//! args = ["-y", "@modelcontextprotocol/server-everything@2026.8.31", "stdio"]
//! pass_env = ["PATH", "HOME"]         # the only variables of ours it sees
//! tools = ["trigger-long-running-operation"]   # optional allowlist
//! prefix = "everything_"              # optional: served as everything_trigger-…
//!
//! [[mcp.servers]]
//! name = "research"
//! url = "https://mcp.example.com/mcp" # … or a Streamable HTTP server
//! bearer_token_env = "RESEARCH_MCP_TOKEN"
//! principal_tokens = { "token:alice" = "RESEARCH_TOKEN_ALICE" }  # alice's calls as alice
//!
//! [[mcp.servers]]
//! name = "github"
//! command = "github-mcp-server"
//! args = ["stdio"]
//! # alice's calls run with her own token in the server's environment
//! principal_env = { "token:alice" = { GITHUB_PERSONAL_ACCESS_TOKEN = "ALICE_GITHUB_TOKEN" } }
//! ```
//!
//! [`McpConfig`] is what the file says (an unknown key is refused by path);
//! [`McpConfig::resolve`] checks it and reads the secrets from the
//! environment, giving [`ServerSettings`]. A stdio server starts with an
//! empty environment plus `env` and `pass_env`: agentgate's own secrets (a
//! GitHub token, AWS keys) never reach a process the operator did not hand
//! them to.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

/// The section's name in the config file.
pub const SECTION: &str = "mcp";

/// The `[mcp]` table.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct McpConfig {
    /// The servers, each `[[mcp.servers]]`.
    pub servers: Vec<ServerConfig>,
}

/// One `[[mcp.servers]]` entry, as written.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    /// Names the server in errors, logs and metrics; letters, digits, `_`, `-`.
    pub name: String,
    /// A stdio server: the program to run (once per call).
    pub command: Option<String>,
    /// Its arguments.
    pub args: Vec<String>,
    /// Variables set for it, as written.
    pub env: BTreeMap<String, String>,
    /// Variables of agentgate's own environment passed on to it by name.
    pub pass_env: Vec<String>,
    /// Where it runs (default: agentgate's working directory).
    pub cwd: Option<PathBuf>,
    /// Variables set for one principal's calls only: principal → (the
    /// server's variable → the variable of agentgate's environment holding
    /// that principal's value). A listed principal's calls run the server
    /// as itself; the others get `env` and `pass_env` alone.
    pub principal_env: BTreeMap<String, BTreeMap<String, String>>,
    /// A Streamable HTTP server's endpoint, e.g. `https://host/mcp`.
    pub url: Option<String>,
    /// The environment variable holding the bearer token sent to `url`.
    pub bearer_token_env: Option<String>,
    /// A bearer token per principal: principal → the environment variable
    /// holding that principal's own token at `url`. A listed principal's
    /// calls go upstream as itself; the others use `bearer_token_env`.
    pub principal_tokens: BTreeMap<String, String>,
    /// OAuth client credentials for `url`: a token from this endpoint is
    /// sent instead of `bearer_token_env`'s.
    pub oauth: Option<OAuthConfig>,
    /// Serve only these of its tools (default: all it lists).
    pub tools: Option<Vec<String>>,
    /// Put before every tool name agentgate serves (default: none).
    pub prefix: String,
    /// Tools that may be called again after agentgate died during a call,
    /// besides those the server marks `idempotentHint` or `readOnlyHint`.
    pub repeat_after_crash: Vec<String>,
    /// Principals that may call its tools (default: every principal).
    pub principals: Option<Vec<String>>,
    /// Calls open at once (default 16); more wait for a free one.
    pub max_calls: Option<usize>,
    /// The longest one call may take (default 3600).
    pub call_timeout_seconds: Option<u64>,
    /// How long starting or connecting may take (default 30).
    pub connect_timeout_seconds: Option<u64>,
    /// How long a call agentgate lost track of (a restart, an instance that
    /// died) is waited for before it is repeated or reported interrupted
    /// (default 30).
    pub takeover_after_seconds: Option<u64>,
    /// Who answers the server's `sampling/createMessage` (a model's
    /// completion): nobody (refused, the default) or the caller.
    pub sampling: Sampling,
    /// The roots agentgate gives the server when it asks (`roots/list`):
    /// none by default, and then its asking is refused.
    pub roots: Vec<RootConfig>,
}

/// `oauth` of a `url` server: the client credentials grant (RFC 6749
/// §4.4) at an endpoint the operator names (never one the server points
/// at: the request carries the client secret).
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OAuthConfig {
    /// The token endpoint, `https://…` (or `http://` on loopback).
    pub token_url: String,
    /// The client's id.
    pub client_id: String,
    /// The environment variable holding the client's secret.
    pub client_secret_env: String,
    /// Scopes to ask for (default: none, the endpoint's default).
    pub scopes: Vec<String>,
    /// RFC 8707's `resource` (default: the server's `url`, as MCP's
    /// authorization spec asks); `""` sends none.
    pub resource: Option<String>,
}

/// A `url` server's OAuth client, with the token it holds.
#[derive(Debug)]
pub struct UpstreamOAuth {
    /// Fetches and caches the token.
    pub client: agentgate_backend::oauth::ClientCredentials,
    /// Where.
    pub token_url: reqwest::Url,
    /// What for.
    pub scopes: Vec<String>,
    /// RFC 8707's `resource`, when sent.
    pub resource: Option<String>,
}

impl UpstreamOAuth {
    /// The token for the next connection.
    pub async fn token(
        &self,
        metrics: &agentgate_backend::UpstreamMetrics,
    ) -> Result<agentgate_backend::oauth::BearerToken, agentgate_backend::oauth::AuthError> {
        let extra: Vec<(&str, &str)> = self
            .resource
            .as_deref()
            .map(|resource| ("resource", resource))
            .into_iter()
            .collect();
        self.client
            .token(&self.token_url, &self.scopes, &extra, metrics)
            .await
    }
}

/// `sampling` of a server.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Sampling {
    /// Refused with an error naming this setting.
    #[default]
    Refuse,
    /// Asked of the caller of the tool, as an input request of its task:
    /// the caller's model writes the completion.
    Caller,
}

/// One of `roots`.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RootConfig {
    /// A `file://` URI.
    pub uri: String,
    /// A name for people.
    pub name: Option<String>,
}

/// A secret read from the environment; never printed.
#[derive(Clone)]
pub struct Secret(String);

impl Secret {
    /// The secret itself, for the one place it is sent.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// How a server is reached. `Debug` shows variables' names, never their
/// values (`pass_env` may carry a token).
#[derive(Clone)]
pub enum Transport {
    /// A child process speaking MCP on stdin/stdout.
    Stdio {
        /// The program.
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Its whole environment, but for `principal_env`.
        env: BTreeMap<String, String>,
        /// What a listed principal's calls add to `env`.
        principal_env: BTreeMap<String, BTreeMap<String, Secret>>,
        /// Its working directory.
        cwd: Option<PathBuf>,
    },
    /// Streamable HTTP.
    Http {
        /// The endpoint.
        url: String,
        /// Sent as `Authorization: Bearer …`, to `url` only.
        token: Option<Secret>,
        /// Each listed principal's own token, sent instead of `token` for
        /// that principal's calls.
        principal_tokens: BTreeMap<String, Secret>,
        /// Tokens by client credentials, for the others.
        oauth: Option<std::sync::Arc<UpstreamOAuth>>,
    },
}

impl std::fmt::Debug for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Transport::Stdio {
                command,
                args,
                env,
                principal_env,
                cwd,
            } => f
                .debug_struct("Stdio")
                .field("command", command)
                .field("args", args)
                .field("env", &env.keys().collect::<Vec<_>>())
                .field(
                    "principal_env",
                    &principal_env
                        .iter()
                        .map(|(who, vars)| (who, vars.keys().collect::<Vec<_>>()))
                        .collect::<Vec<_>>(),
                )
                .field("cwd", cwd)
                .finish(),
            Transport::Http {
                url,
                token,
                principal_tokens,
                oauth,
            } => f
                .debug_struct("Http")
                .field("url", url)
                .field("token", token)
                .field("principal_tokens", principal_tokens)
                .field("oauth", oauth)
                .finish(),
        }
    }
}

/// One server, checked, with its secrets read.
#[derive(Debug, Clone)]
pub struct ServerSettings {
    /// Its name.
    pub name: String,
    /// How it is reached.
    pub transport: Transport,
    /// The allowlist of upstream tool names.
    pub tools: Option<Vec<String>>,
    /// The prefix of served names.
    pub prefix: String,
    /// Upstream tool names the operator says are safe to repeat.
    pub repeat_after_crash: Vec<String>,
    /// Who may call.
    pub principals: Option<Vec<String>>,
    /// Calls open at once.
    pub max_calls: usize,
    /// One call's time limit.
    pub call_timeout: Duration,
    /// Starting or connecting.
    pub connect_timeout: Duration,
    /// See [`ServerConfig::takeover_after_seconds`].
    pub takeover_after: Duration,
    /// See [`ServerConfig::sampling`].
    pub sampling: Sampling,
    /// See [`ServerConfig::roots`]: checked `file://` URIs.
    pub roots: Vec<RootConfig>,
}

/// A setting that cannot work, by its path in the config file.
#[derive(Debug, thiserror::Error)]
#[error("[mcp] {path}: {message}")]
pub struct SettingsError {
    /// E.g. `servers[0].url`.
    pub path: String,
    /// What is wrong and how to fix it.
    pub message: String,
}

fn refuse(path: String, message: impl Into<String>) -> SettingsError {
    SettingsError {
        path,
        message: message.into(),
    }
}

/// The most `roots` one server is given.
pub const MAX_ROOTS: usize = 64;

/// The longest `call_timeout_seconds` (a week, a task's longest life).
const MAX_CALL_TIMEOUT: u64 = 7 * 24 * 3600;

impl McpConfig {
    /// Checks every server and reads its secrets through `env`.
    pub fn resolve(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Vec<ServerSettings>, SettingsError> {
        let mut seen: Vec<&str> = Vec::new();
        let mut servers = Vec::with_capacity(self.servers.len());
        for (i, server) in self.servers.iter().enumerate() {
            let at = format!("servers[{i}]");
            if seen.contains(&server.name.as_str()) {
                return Err(refuse(
                    format!("{at}.name"),
                    format!(
                        "\"{}\" names two servers; give each its own name",
                        server.name
                    ),
                ));
            }
            seen.push(&server.name);
            servers.push(server.resolve(&at, env)?);
        }
        Ok(servers)
    }
}

impl ServerConfig {
    fn resolve(
        &self,
        at: &str,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<ServerSettings, SettingsError> {
        let name = self.name.trim();
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err(refuse(
                format!("{at}.name"),
                format!(
                    "{:?} is not a server name: use letters, digits, `_` and `-`, e.g. \"research\"",
                    self.name
                ),
            ));
        }
        let transport = match (&self.command, &self.url) {
            (Some(_), Some(_)) => {
                return Err(refuse(
                    at.to_owned(),
                    "sets both `command` (stdio) and `url` (HTTP); keep the one that reaches the server",
                ));
            }
            (None, None) => {
                return Err(refuse(
                    at.to_owned(),
                    "says neither how to start the server (`command = \"…\"`) nor where it is \
                     (`url = \"https://…/mcp\"`)",
                ));
            }
            (Some(command), None) => self.stdio(at, command, env)?,
            (None, Some(url)) => self.http(at, url, env)?,
        };
        for (field, names) in [
            ("tools", self.tools.as_deref().unwrap_or_default()),
            ("repeat_after_crash", &self.repeat_after_crash[..]),
            ("principals", self.principals.as_deref().unwrap_or_default()),
        ] {
            if let Some(i) = names.iter().position(|n| n.trim().is_empty()) {
                return Err(refuse(format!("{at}.{field}[{i}]"), "is empty; remove it"));
            }
        }
        let max_calls = self.max_calls.unwrap_or(16);
        if max_calls == 0 {
            return Err(refuse(
                format!("{at}.max_calls"),
                "is 0, so no call could ever run; set at least 1 (default 16)",
            ));
        }
        let seconds = |field: &str, value: Option<u64>, default: u64, max: u64| {
            let value = value.unwrap_or(default);
            if value == 0 || value > max {
                return Err(refuse(
                    format!("{at}.{field}"),
                    format!("is {value}; use 1 to {max} seconds (default {default})"),
                ));
            }
            Ok(Duration::from_secs(value))
        };
        Ok(ServerSettings {
            name: name.to_owned(),
            transport,
            tools: self.tools.clone(),
            prefix: self.prefix.clone(),
            repeat_after_crash: self.repeat_after_crash.clone(),
            principals: self.principals.clone(),
            max_calls,
            call_timeout: seconds(
                "call_timeout_seconds",
                self.call_timeout_seconds,
                3600,
                MAX_CALL_TIMEOUT,
            )?,
            connect_timeout: seconds(
                "connect_timeout_seconds",
                self.connect_timeout_seconds,
                30,
                600,
            )?,
            takeover_after: seconds(
                "takeover_after_seconds",
                self.takeover_after_seconds,
                30,
                3600,
            )?,
            sampling: self.sampling,
            roots: self.checked_roots(at)?,
        })
    }

    fn stdio(
        &self,
        at: &str,
        command: &str,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Transport, SettingsError> {
        if command.trim().is_empty() {
            return Err(refuse(
                format!("{at}.command"),
                "is empty; name the program that serves MCP on stdio, e.g. \"npx\"",
            ));
        }
        for (field, set) in [
            ("bearer_token_env", self.bearer_token_env.is_some()),
            ("principal_tokens", !self.principal_tokens.is_empty()),
            ("oauth", self.oauth.is_some()),
        ] {
            if set {
                return Err(refuse(
                    format!("{at}.{field}"),
                    "is for `url` servers; give a stdio server its token with `env` or `pass_env`",
                ));
            }
        }
        let mut vars = BTreeMap::new();
        for (i, var) in self.pass_env.iter().enumerate() {
            let Some(value) = env(var) else {
                return Err(refuse(
                    format!("{at}.pass_env[{i}]"),
                    format!("{var} is not set in agentgate's environment; set it or remove it"),
                ));
            };
            vars.insert(var.clone(), value);
        }
        vars.extend(self.env.clone());
        let mut principal_env = BTreeMap::new();
        for (principal, wanted) in &self.principal_env {
            let path = format!("{at}.principal_env.\"{principal}\"");
            self.check_principal(&path, principal)?;
            let mut own = BTreeMap::new();
            for (var, from) in wanted {
                let path = format!("{path}.{var}");
                if var.trim().is_empty() || var.contains('=') {
                    return Err(refuse(path, "is not a variable name"));
                }
                match env(from).filter(|value| !value.is_empty()) {
                    Some(value) => {
                        own.insert(var.clone(), Secret(value));
                    }
                    None => {
                        return Err(refuse(
                            path,
                            format!(
                                "{from} is not set (or empty) in agentgate's environment; \
                                 export {principal}'s value in it"
                            ),
                        ));
                    }
                }
            }
            principal_env.insert(principal.clone(), own);
        }
        Ok(Transport::Stdio {
            command: command.to_owned(),
            args: self.args.clone(),
            env: vars,
            principal_env,
            cwd: self.cwd.clone(),
        })
    }

    /// `roots`, each a `file://` URI (the only kind MCP defines), at most
    /// [`MAX_ROOTS`].
    fn checked_roots(&self, at: &str) -> Result<Vec<RootConfig>, SettingsError> {
        if self.roots.len() > MAX_ROOTS {
            return Err(refuse(
                format!("{at}.roots"),
                format!("lists {} roots; give at most {MAX_ROOTS}", self.roots.len()),
            ));
        }
        for (i, root) in self.roots.iter().enumerate() {
            let parsed = root.uri.parse::<reqwest::Url>();
            if !parsed.is_ok_and(|url| url.scheme() == "file") {
                return Err(refuse(
                    format!("{at}.roots[{i}].uri"),
                    format!(
                        "{:?} is not a file:// URI; write it as \"file:///path/to/dir\"",
                        root.uri
                    ),
                ));
            }
        }
        Ok(self.roots.clone())
    }

    /// A principal named in `principal_tokens` or `principal_env` (at
    /// `path`): one that could use it.
    fn check_principal(&self, path: &str, principal: &str) -> Result<(), SettingsError> {
        if principal.trim().is_empty() {
            return Err(refuse(
                path.to_owned(),
                "names no principal; use the principal as its tasks are owned, e.g. \"token:alice\"",
            ));
        }
        if let Some(allowed) = &self.principals
            && !allowed.iter().any(|p| p == principal)
        {
            return Err(refuse(
                path.to_owned(),
                format!(
                    "{principal:?} has its own settings here but is not in this server's \
                     `principals`, so it could never use them; add it there or remove them"
                ),
            ));
        }
        Ok(())
    }

    fn http(
        &self,
        at: &str,
        url: &str,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Transport, SettingsError> {
        for (field, set) in [
            ("args", !self.args.is_empty()),
            ("env", !self.env.is_empty()),
            ("pass_env", !self.pass_env.is_empty()),
            ("cwd", self.cwd.is_some()),
        ] {
            if set {
                return Err(refuse(
                    format!("{at}.{field}"),
                    "is for stdio servers (`command`); remove it from a `url` server",
                ));
            }
        }
        if !self.principal_env.is_empty() {
            return Err(refuse(
                format!("{at}.principal_env"),
                "is for stdio servers (`command`); give a `url` server's principals their own \
                 tokens with `principal_tokens`",
            ));
        }
        let parsed = url.parse::<reqwest::Url>().map_err(|e| {
            refuse(
                format!("{at}.url"),
                format!("{url:?} is not a URL ({e}); write it as http(s)://host:port/mcp"),
            )
        })?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(refuse(
                format!("{at}.url"),
                format!("{url:?} is not http(s); write it as http(s)://host:port/mcp"),
            ));
        }
        let token = match &self.bearer_token_env {
            None => None,
            Some(var) => match env(var).filter(|token| !token.trim().is_empty()) {
                Some(token) => Some(Secret(token)),
                None => {
                    return Err(refuse(
                        format!("{at}.bearer_token_env"),
                        format!("{var} is not set (or empty); export the server's token in it"),
                    ));
                }
            },
        };
        let mut principal_tokens = BTreeMap::new();
        for (principal, var) in &self.principal_tokens {
            let path = format!("{at}.principal_tokens.\"{principal}\"");
            self.check_principal(&path, principal)?;
            match env(var).filter(|token| !token.trim().is_empty()) {
                Some(token) => {
                    principal_tokens.insert(principal.clone(), Secret(token));
                }
                None => {
                    return Err(refuse(
                        path,
                        format!("{var} is not set (or empty); export {principal}'s token in it"),
                    ));
                }
            }
        }
        let oauth = match &self.oauth {
            None => None,
            Some(oauth) => Some(std::sync::Arc::new(self.oauth_client(at, url, oauth, env)?)),
        };
        if oauth.is_some() && token.is_some() {
            return Err(refuse(
                format!("{at}.oauth"),
                "and `bearer_token_env` both say how to authenticate; keep one",
            ));
        }
        Ok(Transport::Http {
            url: url.to_owned(),
            token,
            principal_tokens,
            oauth,
        })
    }

    fn oauth_client(
        &self,
        at: &str,
        url: &str,
        oauth: &OAuthConfig,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<UpstreamOAuth, SettingsError> {
        let at = format!("{at}.oauth");
        let token_url = oauth.token_url.parse::<reqwest::Url>().map_err(|e| {
            refuse(
                format!("{at}.token_url"),
                format!("{:?} is not a URL ({e})", oauth.token_url),
            )
        })?;
        let loopback = token_url.host_str().is_some_and(|host| {
            host == "localhost"
                || host
                    .parse::<std::net::IpAddr>()
                    .is_ok_and(|ip| ip.is_loopback())
        });
        if token_url.scheme() != "https" && !(token_url.scheme() == "http" && loopback) {
            return Err(refuse(
                format!("{at}.token_url"),
                format!(
                    "{:?} would send the client secret in clear; use https:// (http:// only on \
                     loopback)",
                    oauth.token_url
                ),
            ));
        }
        if oauth.client_id.trim().is_empty() {
            return Err(refuse(
                format!("{at}.client_id"),
                "is empty; give the client's id",
            ));
        }
        let Some(secret) = env(&oauth.client_secret_env).filter(|s| !s.trim().is_empty()) else {
            return Err(refuse(
                format!("{at}.client_secret_env"),
                format!(
                    "{:?} is not set (or empty); export the client's secret in it",
                    oauth.client_secret_env
                ),
            ));
        };
        // The token request carries the secret: no redirect is followed.
        // Its time limit is half the connect timeout, so a slow endpoint
        // fails the fetch before it fails every connection waiting on it.
        let limit = self.connect_timeout_seconds.unwrap_or(30).clamp(2, 600) / 2;
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_secs(limit))
            .build()
            .map_err(|e| refuse(at.clone(), format!("cannot build its HTTP client: {e}")))?;
        let resource = match oauth.resource.as_deref() {
            None => Some(url.to_owned()),
            Some("") => None,
            Some(resource) => Some(resource.to_owned()),
        };
        Ok(UpstreamOAuth {
            client: agentgate_backend::oauth::ClientCredentials::new(
                oauth.client_id.clone(),
                secret,
                oauth.client_secret_env.clone(),
                at,
                http,
            ),
            token_url,
            scopes: oauth.scopes.clone(),
            resource,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(toml_like: serde_json::Value) -> McpConfig {
        agentgate_backend::parse_section(SECTION, Some(toml_like)).expect("parses")
    }

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn an_unknown_key_is_refused_by_its_path() {
        let typo = serde_json::json!({"servers": [{"name": "a", "comand": "x"}]});
        let error = agentgate_backend::parse_section::<McpConfig>(SECTION, Some(typo))
            .expect_err("refused");
        assert!(
            error
                .to_string()
                .starts_with("[mcp] servers[0].comand: unknown field `comand`"),
            "{error}"
        );
    }

    #[test]
    fn a_server_needs_exactly_one_way_to_reach_it() {
        let both = config(
            serde_json::json!({"servers": [{"name": "a", "command": "x", "url": "http://h/mcp"}]}),
        );
        let error = both.resolve(&no_env).expect_err("refused");
        assert_eq!(error.path, "servers[0]");
        let neither = config(serde_json::json!({"servers": [{"name": "a"}]}));
        assert!(
            neither
                .resolve(&no_env)
                .expect_err("refused")
                .message
                .contains("command")
        );
    }

    #[test]
    fn a_missing_token_variable_is_named() {
        let c = config(
            serde_json::json!({"servers": [{"name": "a", "url": "https://h/mcp", "bearer_token_env": "A_TOKEN"}]}),
        );
        let error = c.resolve(&no_env).expect_err("refused");
        assert_eq!(error.path, "servers[0].bearer_token_env");
        assert!(error.message.contains("A_TOKEN"), "{}", error.message);
        let set = |name: &str| (name == "A_TOKEN").then(|| "sekret".to_owned());
        let settings = c.resolve(&set).expect("resolves");
        assert!(!format!("{settings:?}").contains("sekret"));
    }

    #[test]
    fn a_stdio_server_sees_only_what_it_is_given() {
        let c = config(
            serde_json::json!({"servers": [{"name": "a", "command": "srv", "pass_env": ["HOME"], "env": {"MODE": "x"}}]}),
        );
        let lookup = |name: &str| match name {
            "HOME" => Some("/home/a".to_owned()),
            "GITHUB_TOKEN" => Some("ghp_secret".to_owned()),
            _ => None,
        };
        let settings = c.resolve(&lookup).expect("resolves");
        let Transport::Stdio { env, .. } = &settings[0].transport else {
            panic!("stdio expected");
        };
        assert_eq!(
            env.iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>(),
            ["HOME=/home/a", "MODE=x"]
        );
        let missing = config(
            serde_json::json!({"servers": [{"name": "a", "command": "srv", "pass_env": ["NOPE"]}]}),
        );
        assert_eq!(
            missing.resolve(&lookup).expect_err("refused").path,
            "servers[0].pass_env[0]"
        );
    }

    #[test]
    fn a_principal_token_needs_its_variable_and_an_allowed_principal() {
        let c = config(
            serde_json::json!({"servers": [{"name": "a", "url": "https://h/mcp",
            "principals": ["token:alice"], "principal_tokens": {"token:bob": "BOB_TOKEN"}}]}),
        );
        let error = c.resolve(&no_env).expect_err("refused");
        assert_eq!(error.path, "servers[0].principal_tokens.\"token:bob\"");
        assert!(
            error.message.contains("not in this server's `principals`"),
            "{}",
            error.message
        );
        let c = config(
            serde_json::json!({"servers": [{"name": "a", "url": "https://h/mcp",
            "principal_tokens": {"token:bob": "BOB_TOKEN"}}]}),
        );
        assert!(
            c.resolve(&no_env)
                .expect_err("refused")
                .message
                .contains("BOB_TOKEN")
        );
        let set = |name: &str| (name == "BOB_TOKEN").then(|| "bob-secret".to_owned());
        let settings = c.resolve(&set).expect("resolves");
        assert!(!format!("{settings:?}").contains("bob-secret"));
        let stdio = config(serde_json::json!({"servers": [{"name": "a", "command": "x",
            "principal_tokens": {"token:bob": "BOB_TOKEN"}}]}));
        assert_eq!(
            stdio.resolve(&set).expect_err("refused").path,
            "servers[0].principal_tokens"
        );
    }

    #[test]
    fn a_principal_env_is_read_for_stdio_servers_only_and_never_shown() {
        let c = config(
            serde_json::json!({"servers": [{"name": "a", "command": "srv",
            "principals": ["token:alice", "token:bob"],
            "principal_env": {"token:alice": {"GITHUB_TOKEN": "ALICE_GH"}}}]}),
        );
        let error = c.resolve(&no_env).expect_err("refused");
        assert_eq!(
            error.path,
            "servers[0].principal_env.\"token:alice\".GITHUB_TOKEN"
        );
        assert!(error.message.contains("ALICE_GH"), "{}", error.message);
        let set = |name: &str| (name == "ALICE_GH").then(|| "ghp_alice".to_owned());
        let settings = c.resolve(&set).expect("resolves");
        let Transport::Stdio { principal_env, .. } = &settings[0].transport else {
            panic!("stdio expected");
        };
        assert_eq!(
            principal_env["token:alice"]["GITHUB_TOKEN"].expose(),
            "ghp_alice"
        );
        assert!(!principal_env.contains_key("token:bob"));
        let shown = format!("{settings:?}");
        assert!(
            !shown.contains("ghp_alice") && shown.contains("GITHUB_TOKEN"),
            "{shown}"
        );

        let stranger = config(
            serde_json::json!({"servers": [{"name": "a", "command": "srv",
            "principals": ["token:bob"],
            "principal_env": {"token:alice": {"GITHUB_TOKEN": "ALICE_GH"}}}]}),
        );
        assert_eq!(
            stranger.resolve(&set).expect_err("refused").path,
            "servers[0].principal_env.\"token:alice\""
        );
        let http = config(
            serde_json::json!({"servers": [{"name": "a", "url": "https://h/mcp",
            "principal_env": {"token:alice": {"GITHUB_TOKEN": "ALICE_GH"}}}]}),
        );
        let error = http.resolve(&set).expect_err("refused");
        assert_eq!(error.path, "servers[0].principal_env");
        assert!(
            error.message.contains("principal_tokens"),
            "{}",
            error.message
        );
    }

    #[test]
    fn sampling_and_roots_are_checked_by_path() {
        let c = config(serde_json::json!({"servers": [{"name": "a", "command": "x",
            "sampling": "caller", "roots": [{"uri": "file:///srv/data", "name": "data"}]}]}));
        let settings = c.resolve(&no_env).expect("resolves");
        assert_eq!(settings[0].sampling, Sampling::Caller);
        assert_eq!(settings[0].roots[0].uri, "file:///srv/data");
        let off = config(serde_json::json!({"servers": [{"name": "a", "command": "x"}]}));
        let settings = off.resolve(&no_env).expect("resolves");
        assert_eq!(settings[0].sampling, Sampling::Refuse);
        assert!(settings[0].roots.is_empty());
        let web = config(serde_json::json!({"servers": [{"name": "a", "command": "x",
            "roots": [{"uri": "https://example.com/"}]}]}));
        let error = web.resolve(&no_env).expect_err("refused");
        assert_eq!(error.path, "servers[0].roots[0].uri");
        assert!(error.message.contains("file://"), "{}", error.message);
        let typo = agentgate_backend::parse_section::<McpConfig>(
            SECTION,
            Some(serde_json::json!({"servers": [{"name": "a", "command": "x", "sampling": "client"}]})),
        )
        .expect_err("an unknown sampling policy");
        let typo = typo.to_string();
        assert!(
            typo.contains("servers[0].sampling") && typo.contains("`caller`"),
            "{typo}"
        );
    }

    #[test]
    fn oauth_is_checked_by_path_and_its_secret_never_shown() {
        let with = |oauth: serde_json::Value, extra: serde_json::Value| {
            let mut server =
                serde_json::json!({"name": "a", "url": "https://h/mcp", "oauth": oauth});
            if let (Some(server), Some(extra)) = (server.as_object_mut(), extra.as_object()) {
                server.extend(extra.clone());
            }
            config(serde_json::json!({"servers": [server]}))
        };
        let good = serde_json::json!({"token_url": "https://idp.example.com/token",
            "client_id": "agentgate", "client_secret_env": "MCP_SECRET"});
        let set = |name: &str| (name == "MCP_SECRET").then(|| "s3cret-value".to_owned());
        let settings = with(good.clone(), serde_json::json!({}))
            .resolve(&set)
            .expect("resolves");
        let Transport::Http {
            oauth: Some(oauth), ..
        } = &settings[0].transport
        else {
            panic!("an OAuth client expected");
        };
        assert_eq!(
            oauth.resource.as_deref(),
            Some("https://h/mcp"),
            "RFC 8707's resource"
        );
        assert!(!format!("{settings:?}").contains("s3cret-value"));
        let path_of = |c: McpConfig| c.resolve(&set).expect_err("refused").path;
        assert_eq!(
            path_of(with(
                good.clone(),
                serde_json::json!({"bearer_token_env": "MCP_SECRET"})
            )),
            "servers[0].oauth"
        );
        let mut plain = good.clone();
        plain["token_url"] = "http://idp.example.com/token".into();
        assert_eq!(
            path_of(with(plain, serde_json::json!({}))),
            "servers[0].oauth.token_url"
        );
        let mut loopback = good.clone();
        loopback["token_url"] = "http://127.0.0.1:9/token".into();
        assert!(with(loopback, serde_json::json!({})).resolve(&set).is_ok());
        let unset = with(good.clone(), serde_json::json!({}));
        assert_eq!(
            unset.resolve(&no_env).expect_err("refused").path,
            "servers[0].oauth.client_secret_env"
        );
        let stdio =
            config(serde_json::json!({"servers": [{"name": "a", "command": "x", "oauth": good}]}));
        assert_eq!(path_of(stdio), "servers[0].oauth");
    }

    #[test]
    fn names_limits_and_duplicates_are_checked() {
        let twice = config(
            serde_json::json!({"servers": [{"name": "a", "command": "x"}, {"name": "a", "command": "y"}]}),
        );
        assert_eq!(
            twice.resolve(&no_env).expect_err("refused").path,
            "servers[1].name"
        );
        let spaced = config(serde_json::json!({"servers": [{"name": "a b", "command": "x"}]}));
        assert_eq!(
            spaced.resolve(&no_env).expect_err("refused").path,
            "servers[0].name"
        );
        let zero =
            config(serde_json::json!({"servers": [{"name": "a", "command": "x", "max_calls": 0}]}));
        assert_eq!(
            zero.resolve(&no_env).expect_err("refused").path,
            "servers[0].max_calls"
        );
        let forever = config(
            serde_json::json!({"servers": [{"name": "a", "command": "x", "call_timeout_seconds": 0}]}),
        );
        assert_eq!(
            forever.resolve(&no_env).expect_err("refused").path,
            "servers[0].call_timeout_seconds"
        );
        let scheme = config(serde_json::json!({"servers": [{"name": "a", "url": "ftp://h/mcp"}]}));
        assert_eq!(
            scheme.resolve(&no_env).expect_err("refused").path,
            "servers[0].url"
        );
    }
}
