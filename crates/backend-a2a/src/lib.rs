//! agentgate backend for remote **Agent2Agent (A2A) v1.0** agents: each
//! configured agent is one MCP tool whose calls are durable tasks following
//! one A2A task each (JSON-RPC binding).
//!
//! ```text
//! [a2a] config ─▶ A2aBackend::from_config ─▶ reads every Agent Card (client, auth)
//!                    │                         └─ run(): again every refresh_seconds
//!                    ├─ tools(): `{name}_send_message` per agent ─▶ AgentJob (job)
//!                    │     SendMessage / GetTask / ListTasks / CancelTask ─▶ result (MCP content)
//!                    │     a working task: a stream held by the Follower (follow), push, or polls
//!                    └─ webhook(): /hooks/a2a/{task} (push) ─▶ nudge ─▶ the task's next step
//! ```
//!
//! Modules: [`config`] (the `[a2a]` section), [`wire`] (A2A ProtoJSON
//! types), [`auth`] (bearer tokens, OAuth client credentials), [`guard`]
//! (where requests and credentials may go), [`client`]
//! (HTTP, SSE, errors, metrics), [`job`] (the state machine, the A2A→MCP
//! state mapping, exactly once), [`streams`] (bounded streams), [`push`] (the
//! webhook and its tokens), [`result`] (outputs as tool results).
//! `README.md` beside this crate has a config example, the mapping table and
//! the choices made where the specification is open.

pub mod auth;
pub mod client;
pub mod config;
pub mod guard;
pub mod job;
pub mod push;
pub mod result;
pub mod streams;
pub mod wire;

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use agentgate_backend::{
    Backend, BoxFuture, ConfigError, Nudge, ToolPolicy, ToolSpec, UpstreamMetrics, Webhook,
    parse_section,
};
use tokio_util::sync::CancellationToken;

pub use config::{A2aConfig, AgentConfig, OAuthConfig, SECTION, SettingsError};
pub use job::{AgentJob, SendArgs};
pub use push::PushStats;
pub use streams::FollowerStats;

use job::{Agent, CardState, Shared};
use push::{PushHook, PushWebhook};
use streams::Follower;

/// Why the backend could not be built.
#[derive(Debug, thiserror::Error)]
pub enum A2aError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Settings(#[from] SettingsError),
    #[error("[a2a] building the HTTP client failed: {0}")]
    Http(String),
}

/// Remote A2A agents as tools.
#[derive(Debug, Clone)]
pub struct A2aBackend {
    agents: Vec<Arc<Agent>>,
    refresh: Option<Duration>,
    shared: Arc<Shared>,
    hook: Option<Arc<PushHook>>,
    sync_budget: Duration,
}

impl A2aBackend {
    /// Parses the `[a2a]` table (its JSON form; `None` when absent).
    pub fn parse(section: Option<serde_json::Value>) -> Result<A2aConfig, ConfigError> {
        parse_section(SECTION, section)
    }

    /// Checks `config`, reads the secrets (bearer tokens, OAuth client
    /// secrets, the push secret) from the process environment and every
    /// agent's card (an unreadable card does not fail
    /// the backend: that agent's tool answers with the reason).
    pub async fn from_config(
        config: A2aConfig,
        upstream: UpstreamMetrics,
    ) -> Result<Self, A2aError> {
        Self::with_env(config, upstream, &|name| std::env::var(name).ok()).await
    }

    /// [`from_config`](Self::from_config) with the environment given as a
    /// lookup (tests).
    pub async fn with_env(
        config: A2aConfig,
        upstream: UpstreamMetrics,
        env: &(dyn Fn(&str) -> Option<String> + Sync),
    ) -> Result<Self, A2aError> {
        Self::with_hosts(config, upstream, env, HashMap::new()).await
    }

    /// [`with_env`](Self::with_env), with the names in `hosts` resolved to
    /// the addresses given instead of through DNS (tests: a "public" name
    /// served on a loopback port). The guard's address rules apply to them
    /// as to DNS answers.
    pub async fn with_hosts(
        config: A2aConfig,
        upstream: UpstreamMetrics,
        env: &(dyn Fn(&str) -> Option<String> + Sync),
        hosts: HashMap<String, Vec<IpAddr>>,
    ) -> Result<Self, A2aError> {
        let settings = config.resolve(env)?;
        let hosts = Arc::new(hosts);
        let mut agents: Vec<Arc<Agent>> = Vec::with_capacity(settings.agents.len());
        for agent in settings.agents {
            // Each agent has its own clients: the resolver applies that
            // agent's address rules.
            let guard = guard::Guard::new(&agent);
            let clients = clients_for(
                &guard,
                &hosts,
                settings.request_timeout,
                settings.max_poll_interval,
            )?;
            let auth = auth::Auth::new(
                &agent.credentials,
                &agent.at,
                clients.tokens.clone(),
                guard.clone(),
            );
            let client = client::AgentClient::new(clients.agent, auth, guard, upstream.clone());
            agents.push(Arc::new(Agent::new(agent, client)));
        }
        let follower = Arc::new(Follower::new(
            settings.max_streams,
            settings.max_poll_interval,
        ));
        let hook = settings
            .push
            .as_ref()
            .map(|push| Arc::new(PushHook::new(push, follower.clone(), upstream.clone())));
        let backend = Self {
            agents,
            refresh: settings.refresh,
            shared: Arc::new(Shared {
                follower,
                push: settings.push,
                max_poll_interval: settings.max_poll_interval,
            }),
            hook,
            sync_budget: settings.sync_budget,
        };
        backend.refresh_cards().await;
        Ok(backend)
    }

    /// What the follower did so far.
    pub fn follower_stats(&self) -> FollowerStats {
        self.shared.follower.stats()
    }

    /// What the push webhook saw so far (`None` without push).
    pub fn push_stats(&self) -> Option<PushStats> {
        self.hook.as_ref().map(|h| h.stats())
    }

    /// Reads every agent's card again, all at once.
    pub async fn refresh_cards(&self) {
        futures::future::join_all(self.agents.iter().map(|a| a.refresh())).await;
    }

    /// Each agent's tool name and, when its card is unreadable, why.
    pub fn card_status(&self) -> Vec<(String, Option<String>)> {
        self.agents
            .iter()
            .map(|a| {
                let why = match a.card() {
                    CardState::Ready(_) => None,
                    CardState::Unreadable(why) => Some(why),
                };
                (a.settings.tool_name.clone(), why)
            })
            .collect()
    }
}

/// An agent's HTTP clients.
struct AgentClients {
    agent: client::Clients,
    /// Token requests.
    tokens: reqwest::Client,
}

/// Redirects a card read follows: as many as reqwest's default, none to an
/// internal IP literal the guard refuses (names are the resolver's).
const CARD_REDIRECTS: usize = 10;

fn clients_for(
    guard: &guard::Guard,
    hosts: &Arc<HashMap<String, Vec<IpAddr>>>,
    request_timeout: Duration,
    max_poll_interval: Duration,
) -> Result<AgentClients, A2aError> {
    let resolver = Arc::new(guard.resolver(hosts.clone()));
    let connect = request_timeout.min(Duration::from_secs(10));
    let build = |builder: reqwest::ClientBuilder| {
        builder
            .dns_resolver(resolver.clone())
            .connect_timeout(connect)
            .build()
            .map_err(|e| A2aError::Http(e.to_string()))
    };
    // JSON-RPC calls and token requests carry credentials: no redirect may
    // take them elsewhere (a 3xx is an error naming where it pointed).
    let http = build(
        reqwest::Client::builder()
            .timeout(request_timeout)
            .redirect(reqwest::redirect::Policy::none()),
    )?;
    // Streams live as long as their task: no overall timeout, but a
    // connection silent for this long (no event, no keep-alive) is dead.
    let streams = build(
        reqwest::Client::builder()
            .read_timeout(max_poll_interval.max(Duration::from_secs(60)))
            .redirect(reqwest::redirect::Policy::none()),
    )?;
    let tokens = build(
        reqwest::Client::builder()
            .timeout(request_timeout)
            .redirect(reqwest::redirect::Policy::none()),
    )?;
    // The card is read without credentials; a moved card is followed, but
    // not onto an internal address the agent may not reach.
    let card_guard = guard.clone();
    let cards = build(
        reqwest::Client::builder()
            .timeout(request_timeout)
            .redirect(reqwest::redirect::Policy::custom(move |attempt| {
                if attempt.previous().len() >= CARD_REDIRECTS {
                    return attempt.error("too many redirects");
                }
                match card_guard.target(attempt.url()) {
                    Ok(()) => attempt.follow(),
                    Err(refused) => attempt.error(refused),
                }
            })),
    )?;
    Ok(AgentClients {
        agent: client::Clients {
            http,
            cards,
            streams,
        },
        tokens,
    })
}

/// How much of a card's text (name, description, skills) a tool's
/// description carries: a card is the agent's own words, shown to models, so
/// it gets a bounded share of their context.
pub const CARD_TEXT_CAP: usize = 1024;

/// What precedes the card's text in a tool's description, so a model (and
/// a person reading the tool list) knows whose words follow.
pub const CARD_TEXT_MARK: &str = "[from the A2A agent's card, not agentgate]";

/// The tool's description: agentgate's own sentence, then the card's text
/// (name, description, skills), marked as the agent's and cut to
/// [`CARD_TEXT_CAP`] characters.
fn description(agent: &Agent) -> String {
    let settings = &agent.settings;
    match agent.card() {
        CardState::Ready(card) => {
            let mut said = format!("{}: {}", card.name, card.description);
            if !card.skills.is_empty() {
                said.push_str("\nSkills:");
                for skill in &card.skills {
                    said.push_str(&format!(
                        "\n- {} ({}): {}",
                        skill.name, skill.id, skill.description
                    ));
                }
            }
            format!(
                "Sends a message to the A2A agent configured as `{}` and returns its answer (a \
                 durable task: the agent may ask questions or a sign-in on the way).\n\
                 {CARD_TEXT_MARK} {}",
                settings.name,
                capped(&said, CARD_TEXT_CAP)
            )
        }
        CardState::Unreadable(why) => format!(
            "Sends a message to the A2A agent configured as `{}` ({}); its Agent Card could not \
             be read at start ({why}), so calls fail until it can.",
            settings.name, settings.card_url
        ),
    }
}

/// `text` without control characters but newlines, cut to `cap`
/// characters (the last one an ellipsis) when longer.
fn capped(text: &str, cap: usize) -> String {
    let clean: String = text
        .chars()
        .map(|c| if c.is_control() && c != '\n' { ' ' } else { c })
        .collect();
    if clean.chars().count() <= cap {
        return clean;
    }
    let mut cut: String = clean.chars().take(cap.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

impl Backend for A2aBackend {
    fn setup(&self) -> agentgate_backend::Health {
        use agentgate_backend::Health;
        match self.agents.len() {
            0 => Health::NotConfigured("no agents: add [[a2a.agents]] to the config".to_owned()),
            n => Health::Ready(format!(
                "{n} agent(s): {}",
                self.agents
                    .iter()
                    .map(|agent| agent.settings.tool_name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        }
    }

    fn tools(&self) -> Vec<ToolSpec> {
        self.agents
            .iter()
            .map(|agent| {
                let poll =
                    job::poll_policy(agent.settings.poll_interval, self.shared.max_poll_interval);
                let policy = ToolPolicy::default()
                    .poll(poll)
                    .sync_budget(self.sync_budget);
                ToolSpec::new(
                    agent.settings.tool_name.clone(),
                    description(agent),
                    policy,
                    AgentJob {
                        agent: agent.clone(),
                        shared: self.shared.clone(),
                    },
                )
            })
            .collect()
    }

    fn run(&self, nudge: Nudge, shutdown: CancellationToken) -> BoxFuture<'static, ()> {
        let backend = self.clone();
        Box::pin(async move {
            let follower = backend.shared.follower.clone();
            let follow = follower.run(nudge, shutdown.clone());
            let refresh = async {
                let Some(every) = backend.refresh else {
                    return;
                };
                loop {
                    tokio::select! {
                        () = shutdown.cancelled() => return,
                        () = tokio::time::sleep(every) => backend.refresh_cards().await,
                    }
                }
            };
            tokio::join!(follow, refresh);
        })
    }

    fn webhook(&self) -> Option<Arc<dyn Webhook>> {
        self.hook
            .as_ref()
            .map(|hook| Arc::new(PushWebhook(hook.clone())) as Arc<dyn Webhook>)
    }

    /// Every agent's card was read when the backend was built (a card that
    /// cannot be read stops the start), so this names them.
    fn check(&self) -> BoxFuture<'_, agentgate_backend::Health> {
        use agentgate_backend::Health;
        let health = if self.agents.is_empty() {
            Health::NotConfigured("no agents: add [[a2a.agents]] to the config".to_owned())
        } else {
            let tools: Vec<&str> = self
                .agents
                .iter()
                .map(|a| a.settings.tool_name.as_str())
                .collect();
            Health::Ready(format!(
                "{} agent(s), cards read: {}",
                tools.len(),
                tools.join(", ")
            ))
        };
        Box::pin(async move { health })
    }
}

/// Built from the `[a2a]` table; reads each agent's card before its tool is
/// described.
impl agentgate_backend::ConfiguredBackend for A2aBackend {
    const NAME: &'static str = SECTION;
    type Config = A2aConfig;

    async fn from_config(
        config: A2aConfig,
        upstream: UpstreamMetrics,
    ) -> Result<Self, Box<dyn std::error::Error + Send + Sync>> {
        let backend = A2aBackend::from_config(config, upstream).await?;
        for (tool, problem) in backend.card_status() {
            if let Some(problem) = problem {
                tracing::warn!(%tool, %problem, "agent card unreadable: the tool will say so when called");
            }
        }
        Ok(backend)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn card_text_is_cut_to_the_cap_with_an_ellipsis() {
        assert_eq!(capped("short\u{7}text", 10), "short text");
        let long = "x".repeat(5000);
        let cut = capped(&long, CARD_TEXT_CAP);
        assert_eq!(cut.chars().count(), CARD_TEXT_CAP);
        assert!(cut.ends_with('…'));
    }
}
