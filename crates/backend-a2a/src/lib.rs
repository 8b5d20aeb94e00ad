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
//! types), [`auth`] (bearer tokens, OAuth client credentials), [`client`]
//! (HTTP, SSE, errors, metrics), [`job`] (the state machine, the A2A→MCP
//! state mapping, exactly once), [`follow`] (bounded streams), [`push`] (the
//! webhook and its tokens), [`result`] (outputs as tool results).
//! `README.md` beside this crate has a config example, the mapping table and
//! the choices made where the specification is open.

pub mod auth;
pub mod client;
pub mod config;
pub mod follow;
pub mod job;
pub mod push;
pub mod result;
pub mod wire;

use std::sync::Arc;
use std::time::Duration;

use agentgate_backend::{
    Backend, BoxFuture, ConfigError, Nudge, ToolPolicy, ToolSpec, UpstreamMetrics, Webhook,
    parse_section,
};
use tokio_util::sync::CancellationToken;

pub use config::{A2aConfig, AgentConfig, OAuthConfig, SECTION, SettingsError};
pub use follow::FollowerStats;
pub use job::{AgentJob, SendArgs};
pub use push::PushStats;

use follow::Follower;
use job::{Agent, CardState, Shared};
use push::{PushHook, PushWebhook};

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
        let settings = config.resolve(env)?;
        let http = reqwest::Client::builder()
            .timeout(settings.request_timeout)
            .connect_timeout(settings.request_timeout.min(Duration::from_secs(10)))
            .build()
            .map_err(|e| A2aError::Http(e.to_string()))?;
        // Streams live as long as their task: no overall timeout, but a
        // connection silent for this long (no event, no keep-alive) is dead.
        let streams = reqwest::Client::builder()
            .connect_timeout(settings.request_timeout.min(Duration::from_secs(10)))
            .read_timeout(settings.max_poll_interval.max(Duration::from_secs(60)))
            .build()
            .map_err(|e| A2aError::Http(e.to_string()))?;
        // Token requests carry the client secret: no redirect may take it
        // elsewhere.
        let tokens = reqwest::Client::builder()
            .timeout(settings.request_timeout)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| A2aError::Http(e.to_string()))?;
        let agents: Vec<Arc<Agent>> = settings
            .agents
            .into_iter()
            .map(|agent| {
                let auth = auth::Auth::new(&agent.credentials, &agent.at, tokens.clone());
                let client =
                    client::AgentClient::new(http.clone(), streams.clone(), auth, upstream.clone());
                Arc::new(Agent::new(agent, client))
            })
            .collect();
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

/// The tool's description: the card's, with its skills.
fn description(agent: &Agent) -> String {
    let settings = &agent.settings;
    match agent.card() {
        CardState::Ready(card) => {
            let mut text = format!(
                "Sends a message to the A2A agent \"{}\" and returns its answer (a durable task: \
                 the agent may ask questions or a sign-in on the way). {}",
                card.name, card.description
            );
            if !card.skills.is_empty() {
                text.push_str("\nSkills:");
                for skill in &card.skills {
                    text.push_str(&format!(
                        "\n- {} ({}): {}",
                        skill.name, skill.id, skill.description
                    ));
                }
            }
            text
        }
        CardState::Unreadable(why) => format!(
            "Sends a message to the A2A agent configured as `{}` ({}); its Agent Card could not \
             be read at start ({why}), so calls fail until it can.",
            settings.name, settings.card_url
        ),
    }
}

impl Backend for A2aBackend {
    fn name(&self) -> &str {
        SECTION
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
