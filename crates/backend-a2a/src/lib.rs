//! agentgate backend for remote **Agent2Agent (A2A) v1.0** agents: each
//! configured agent is one MCP tool whose calls are durable tasks following
//! one A2A task each (JSON-RPC binding, polled with `GetTask`).
//!
//! ```text
//! [a2a] config ─▶ A2aBackend::from_config ─▶ reads every Agent Card (client)
//!                    │                         └─ run(): again every refresh_seconds
//!                    └─ tools(): `{name}_send_message` per agent ─▶ AgentJob (job)
//!                                  SendMessage / GetTask / CancelTask ─▶ result (MCP content)
//! ```
//!
//! Modules: [`config`] (the `[a2a]` section), [`wire`] (A2A ProtoJSON
//! types), [`client`] (HTTP, errors, metrics), [`job`] (the state machine
//! and the A2A→MCP state mapping), [`result`] (outputs as tool results).
//! `README.md` beside this crate has a config example, the mapping table and
//! the choices made where the specification is open.

pub mod client;
pub mod config;
pub mod job;
pub mod result;
pub mod wire;

use std::sync::Arc;
use std::time::Duration;

use agentgate_backend::{
    Backend, BoxFuture, ConfigError, Nudge, PollPolicy, ToolPolicy, ToolSpec, UpstreamMetrics,
    parse_section,
};
use tokio_util::sync::CancellationToken;

pub use config::{A2aConfig, AgentConfig, OAuthConfig, SECTION, SettingsError};
pub use job::{AgentJob, SendArgs};

use job::{Agent, CardState};

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
}

impl A2aBackend {
    /// Parses the `[a2a]` table (its JSON form; `None` when absent).
    pub fn parse(section: Option<serde_json::Value>) -> Result<A2aConfig, ConfigError> {
        parse_section(SECTION, section)
    }

    /// Checks `config`, reads the bearer tokens from the process
    /// environment and every agent's card (an unreadable card does not fail
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
        let agents: Vec<Arc<Agent>> = settings
            .agents
            .into_iter()
            .map(|agent| {
                let client =
                    client::AgentClient::new(http.clone(), agent.token.clone(), upstream.clone());
                Arc::new(Agent::new(agent, client))
            })
            .collect();
        let backend = Self {
            agents,
            refresh: settings.refresh,
        };
        backend.refresh_cards().await;
        Ok(backend)
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
                let poll = agent.settings.poll_interval;
                let policy = ToolPolicy::default().poll(PollPolicy::default().working(poll));
                ToolSpec::new(
                    agent.settings.tool_name.clone(),
                    description(agent),
                    policy,
                    AgentJob {
                        agent: agent.clone(),
                    },
                )
            })
            .collect()
    }

    fn run(&self, _nudge: Nudge, shutdown: CancellationToken) -> BoxFuture<'static, ()> {
        let backend = self.clone();
        Box::pin(async move {
            let Some(every) = backend.refresh else {
                return;
            };
            loop {
                tokio::select! {
                    () = shutdown.cancelled() => return,
                    () = tokio::time::sleep(every) => backend.refresh_cards().await,
                }
            }
        })
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
