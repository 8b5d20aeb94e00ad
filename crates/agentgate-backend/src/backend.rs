//! The [`Backend`] trait: one agent API behind agentgate, as the runtime
//! sees it. A backend names its tools and may run background work (a
//! watcher, a refresh of remote tool definitions) until shutdown; its
//! settings come from its own table of the config file, read with
//! [`parse_section`], which refuses unknown keys by name.

use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

use std::sync::Arc;

use crate::{AccessToken, BoxFuture, Nudge, Owner, ToolSpec, UpstreamMetrics, Webhook};

/// One agent API served as MCP tools. Its name (its config section, and
/// how logs and `agentgate check` call it) is its
/// [`ConfiguredBackend::NAME`], said once.
pub trait Backend: Send + Sync + 'static {
    /// The tools it serves now. Asked when the runtime starts, and again
    /// each time the backend calls [`Nudge::tools_changed`] (say, its
    /// upstream announced other tools).
    fn tools(&self) -> Vec<ToolSpec>;

    /// Whether some of its tools may be missing from [`Self::tools`] for
    /// now (an upstream not reached since start, whose tools are served
    /// once it answers, followed by [`Nudge::tools_changed`]). While any
    /// backend says so, a task of a tool that is not served waits for it
    /// (within its TTL) instead of failing. The default: never.
    fn tools_pending(&self) -> bool {
        false
    }

    /// Background work, run until `shutdown` is cancelled; the runtime waits
    /// for it to return before it stops. `nudge` makes a waiting task run
    /// now. The default has none.
    fn run(&self, nudge: Nudge, shutdown: CancellationToken) -> BoxFuture<'static, ()> {
        let _ = (nudge, shutdown);
        Box::pin(async {})
    }

    /// The handler of requests its upstream sends to agentgate, served at
    /// `POST /hooks/{name}/…` on the HTTP server (see [`crate::webhook`]).
    /// The default has none.
    fn webhook(&self) -> Option<Arc<dyn Webhook>> {
        None
    }

    /// Whether its settings let it work, decided without the network (the
    /// environment, the config, files): said once when `agentgate serve`
    /// starts. A backend that is not [`Health::Ready`] has its tools left
    /// out of `tools/list`, so a model is not offered tools that cannot
    /// work; a call by name still reaches the tool, whose error says what
    /// is missing. The default: ready, with nothing to say.
    fn setup(&self) -> Health {
        Health::Ready(String::new())
    }

    /// Whether the backend can work: its settings, and its upstream asked
    /// something cheap that needs the credentials (who they are). What
    /// `agentgate check` shows an operator before serving. The default
    /// says there is nothing to check.
    fn check(&self) -> BoxFuture<'_, Health> {
        Box::pin(async { Health::Ready("nothing to check".to_owned()) })
    }

    /// Called before the gateway serves a request that `owner` made with
    /// an OAuth access token (`token`): a backend that speaks upstream as
    /// the principal itself (Q Business's identity-aware sessions) renews
    /// that identity here, while the principal is present, because its
    /// steps run later, without a request. It must be cheap when nothing is
    /// due, remember a failure for its steps to report, and never keep the
    /// token past the exchange. The default does nothing.
    fn principal_request<'a>(
        &'a self,
        owner: &'a Owner,
        token: &'a AccessToken,
    ) -> BoxFuture<'a, ()> {
        let _ = (owner, token);
        Box::pin(async {})
    }
}

/// What [`Backend::check`] found, in words for the operator.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Health {
    /// Set up, and the upstream answered: what was seen (an identity, the
    /// agents' cards).
    Ready(String),
    /// Not set up: what is missing. Its tools say so when called; the
    /// others work.
    NotConfigured(String),
    /// Set up, but it cannot work: what failed, and the fix.
    Broken(String),
}

/// A backend built from its own config section: what the binary's backend
/// list names, one line per backend.
pub trait ConfiguredBackend: Backend + Sized {
    /// Its config section (`[NAME]`).
    const NAME: &'static str;
    /// The `backend` label of its upstream metrics: the upstream it calls
    /// (`github` for the Copilot backend); by default its name.
    const METRICS_LABEL: &'static str = Self::NAME;
    /// Its settings. A missing section reads as an empty table, so give every
    /// key a default; give it `#[serde(deny_unknown_fields)]` so a typo is
    /// refused by name.
    type Config: DeserializeOwned;
    /// Whether it is served when its section does not say `enabled`. Every
    /// section takes `enabled = true|false`, read by the binary before the
    /// section reaches [`Self::Config`]; an example backend says `false`.
    const ENABLED_BY_DEFAULT: bool = true;

    /// Checks settings beyond their shape (ranges, combinations), so a bad
    /// config file is refused before anything starts. The binary calls it
    /// exactly once per section, right after parsing and before
    /// [`Self::from_config`] (and alone for `agentgate check`), so
    /// `from_config` may take the settings as checked and need not call it
    /// again.
    fn check_config(config: &Self::Config) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        let _ = config;
        Ok(())
    }

    /// The backend for `config` (already through [`Self::check_config`]),
    /// counting its upstream calls into `upstream`. Settings from the
    /// environment are read here too, and anything the tools need to be
    /// described (a remote agent's card).
    fn from_config(
        config: Self::Config,
        upstream: UpstreamMetrics,
    ) -> impl Future<Output = Result<Self, Box<dyn std::error::Error + Send + Sync>>> + Send;
}

/// A backend's config section that does not parse.
#[derive(Debug, thiserror::Error)]
#[error("[{section}] {path}: {message}")]
#[non_exhaustive]
pub struct ConfigError {
    /// The section, e.g. `copilot`.
    pub section: String,
    /// Where in it, e.g. `agents[0].url` (`.` for the section itself).
    pub path: String,
    /// What is wrong, and the fix.
    pub message: String,
}

/// Reads section `name` of the config file (`value`, its table as JSON; a
/// missing section is an empty table) into `T`. Give `T`
/// `#[serde(deny_unknown_fields)]`: an unknown key is then refused by name,
/// and every error names the key path that is wrong.
pub fn parse_section<T: DeserializeOwned>(
    name: &str,
    value: Option<serde_json::Value>,
) -> Result<T, ConfigError> {
    let value = value.unwrap_or_else(|| serde_json::Value::Object(Default::default()));
    serde_path_to_error::deserialize(value).map_err(|e| ConfigError {
        section: name.to_owned(),
        path: e.path().to_string(),
        message: e.into_inner().to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Agent {
        url: String,
    }

    #[derive(Debug, Deserialize, PartialEq, Default)]
    #[serde(deny_unknown_fields)]
    struct Section {
        #[serde(default)]
        agents: Vec<Agent>,
        #[serde(default)]
        refresh_seconds: Option<u64>,
    }

    #[test]
    fn a_missing_section_is_the_default() {
        let parsed: Section = parse_section("a2a", None).expect("parses");
        assert_eq!(parsed, Section::default());
    }

    #[test]
    fn an_unknown_key_is_refused_by_its_path() {
        let value = serde_json::json!({"agents": [{"url": "http://x", "token": "t"}]});
        let e = parse_section::<Section>("a2a", Some(value)).expect_err("unknown key");
        assert_eq!(e.section, "a2a");
        assert_eq!(e.path, "agents[0].token");
        assert!(e.message.contains("unknown field `token`"), "{e}");
        assert!(e.to_string().starts_with("[a2a] agents[0].token: "), "{e}");
    }

    #[test]
    fn a_wrong_type_names_its_key() {
        let value = serde_json::json!({"refresh_seconds": "soon"});
        let e = parse_section::<Section>("a2a", Some(value)).expect_err("wrong type");
        assert_eq!(e.path, "refresh_seconds");
    }
}
