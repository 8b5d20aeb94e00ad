//! agentgate backend for **any MCP server**: the tools of each server named
//! in `[[mcp.servers]]` (a stdio command or a Streamable HTTP URL), served
//! through agentgate as durable tasks on every task wire and inline.
//!
//! ```text
//! [mcp] config ─▶ McpBackend::from_config ─▶ per server: connect, tools/list, disconnect
//!                    └─ tools(): each listed tool (allowlist, prefix) ─▶ UpstreamToolJob
//! run: per server still to list, or announcing changes: follow (list again, tell the engine)
//! tools/call ─▶ task ─▶ UpstreamToolJob: one upstream tools/call per task, on its own
//!                         connection (calls), followed step by step (job)
//! ```
//!
//! Modules: [`config`] (the `[mcp]` section), `upstream` (rmcp's client
//! side: connecting, progress, questions), `follow` (the tool lists while
//! serving), `calls` (the calls this process has open), `session` (HTTP
//! sessions saved and entered again), `job` (the state machine and the
//! crash rules).
//! `docs/backends/mcp.md` has the config, the crash semantics and the
//! limits.

pub mod config;

mod calls;
mod follow;
mod job;
mod session;
mod upstream;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentgate_backend::{
    Backend, BoxFuture, ConfiguredBackend, Health, Nudge, ToolPolicy, ToolSpec, UpstreamMetrics,
};
use rmcp::model::Tool;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

pub use config::{McpConfig, SECTION, ServerConfig, ServerSettings, SettingsError};
pub use job::{CallState, UpstreamToolJob};

use calls::Calls;
use upstream::{CallClient, Upstream};

/// How often ended calls are forgotten and unfollowed ones cancelled.
const SWEEP_EVERY: Duration = Duration::from_secs(60);

/// What one server offers, as last listed.
enum Listing {
    /// Its tools, and whether it announces changes to them
    /// (`capabilities.tools.listChanged`).
    Tools { tools: Vec<Tool>, announces: bool },
    /// Never listed; why.
    Unreachable(String),
}

struct Server {
    upstream: Arc<Upstream>,
    /// Changed by [`follow`] while the gateway runs.
    listing: Mutex<Listing>,
    /// When it was first listed, in this process's order of listings (0:
    /// never): its tools are offered in that order, so of two servers that
    /// serve one name, the one served first keeps it when the other comes
    /// up late.
    first_listed: AtomicU64,
    permits: Arc<Semaphore>,
}

/// The order of servers' first listings in this process.
static LISTINGS: AtomicU64 = AtomicU64::new(0);

impl Server {
    /// Files a new listing; returns whether the tools changed.
    fn listed(&self, tools: Vec<Tool>, announces: bool) -> bool {
        let mut listing = upstream::lock(&self.listing);
        let changed = match &*listing {
            Listing::Tools { tools: before, .. } => *before != tools,
            Listing::Unreachable(_) => {
                let order = LISTINGS.fetch_add(1, Ordering::Relaxed) + 1;
                self.first_listed.store(order, Ordering::Relaxed);
                true
            }
        };
        if changed {
            tracing::info!(server = %self.upstream.settings.name, tools = tools.len(), "MCP server's tools listed");
        }
        *listing = Listing::Tools { tools, announces };
        changed
    }

    /// Files why the server cannot be listed now: a server never listed
    /// says so in `check`; one listed before keeps its tools.
    fn unreachable(&self, why: String) {
        let mut listing = upstream::lock(&self.listing);
        match &*listing {
            Listing::Unreachable(_) => *listing = Listing::Unreachable(why),
            Listing::Tools { .. } => {
                tracing::warn!(server = %self.upstream.settings.name, problem = %why, "MCP server unreachable; its tools as last listed stay served");
            }
        }
    }

    /// Whether [`follow`] has work: a server to list, or changes to hear.
    fn to_follow(&self) -> bool {
        !matches!(
            &*upstream::lock(&self.listing),
            Listing::Tools {
                announces: false,
                ..
            }
        )
    }
}

/// The configured MCP servers' tools.
pub struct McpBackend {
    servers: Vec<Arc<Server>>,
    calls: Arc<Calls>,
}

impl std::fmt::Debug for McpBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpBackend")
            .field(
                "servers",
                &self
                    .servers
                    .iter()
                    .map(|s| &s.upstream.settings.name)
                    .collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

/// Why the backend could not be built.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct McpError(#[from] SettingsError);

impl McpBackend {
    /// Checks `config`, reads its secrets from the process environment and
    /// lists every server's tools (a server that cannot be reached does
    /// not fail the start: its tools are missing, and `check` says why).
    pub async fn from_config(
        config: McpConfig,
        metrics: UpstreamMetrics,
    ) -> Result<Self, McpError> {
        Self::with_env(config, metrics, &|name| std::env::var(name).ok()).await
    }

    /// [`from_config`](Self::from_config) with the environment given as a
    /// lookup (tests).
    pub async fn with_env(
        config: McpConfig,
        metrics: UpstreamMetrics,
        env: &(dyn Fn(&str) -> Option<String> + Sync),
    ) -> Result<Self, McpError> {
        let settings = config.resolve(env)?;
        // All at once: a start waits for the slowest server's connect
        // timeout, not for the sum of them.
        let listings = futures::future::join_all(settings.into_iter().map(|settings| {
            let upstream = Arc::new(Upstream::new(settings, metrics.clone()));
            async move {
                let listing = list(&upstream).await;
                (upstream, listing)
            }
        }))
        .await;
        let servers = listings
            .into_iter()
            .map(|(upstream, listing)| {
                if let Listing::Unreachable(why) = &listing {
                    tracing::warn!(server = %upstream.settings.name, problem = %why, "MCP server unreachable at start: its tools are served once it answers");
                }
                let first_listed = match &listing {
                    Listing::Tools { .. } => LISTINGS.fetch_add(1, Ordering::Relaxed) + 1,
                    Listing::Unreachable(_) => 0,
                };
                Arc::new(Server {
                    permits: Arc::new(Semaphore::new(upstream.settings.max_calls)),
                    upstream,
                    listing: Mutex::new(listing),
                    first_listed: AtomicU64::new(first_listed),
                })
            })
            .collect();
        Ok(Self {
            servers,
            calls: Arc::new(Calls::new()),
        })
    }

    /// Each server's name and the tool names served for it, or why none.
    pub fn listing(&self) -> Vec<(String, Result<Vec<String>, String>)> {
        self.servers
            .iter()
            .map(|server| {
                let settings = &server.upstream.settings;
                let served = match &*upstream::lock(&server.listing) {
                    Listing::Tools { tools, .. } => Ok(served(settings, tools)
                        .map(|(tool, _)| prefixed(settings, &tool.name))
                        .collect()),
                    Listing::Unreachable(why) => Err(why.clone()),
                };
                (settings.name.clone(), served)
            })
            .collect()
    }
}

/// The tools of `tools` (a server's listing) that are served, each with
/// whether it may be repeated after a lost call.
fn served<'a>(
    settings: &'a ServerSettings,
    tools: &'a [Tool],
) -> impl Iterator<Item = (&'a Tool, bool)> {
    tools.iter().filter_map(move |tool| {
        if let Some(allowed) = &settings.tools
            && !allowed.iter().any(|name| name == tool.name.as_ref())
        {
            return None;
        }
        let hinted = tool
            .annotations
            .as_ref()
            .is_some_and(|a| a.idempotent_hint == Some(true) || a.read_only_hint == Some(true));
        let repeatable = hinted
            || settings
                .repeat_after_crash
                .iter()
                .any(|name| name == tool.name.as_ref());
        Some((tool, repeatable))
    })
}

fn prefixed(settings: &ServerSettings, name: &str) -> String {
    format!("{}{name}", settings.prefix)
}

/// Connects once, lists every tool (following pages), disconnects.
async fn list(upstream: &Arc<Upstream>) -> Listing {
    let connection = match upstream.connect(CallClient::quiet(), None).await {
        Ok(connection) => connection,
        Err(why) => return Listing::Unreachable(why.for_operator()),
    };
    let announces = connection.peer().peer_info().and_then(|info| {
        info.capabilities
            .tools
            .as_ref()
            .and_then(|t| t.list_changed)
    }) == Some(true);
    let listed = follow::list_on(upstream, &connection).await;
    connection.close().await;
    match listed {
        Ok(tools) => Listing::Tools { tools, announces },
        Err(why) => Listing::Unreachable(why),
    }
}

impl Backend for McpBackend {
    /// Ready while any server's tools were listed: a server that could not
    /// be reached only lacks its own tools (and `check` names it).
    fn setup(&self) -> Health {
        if self.servers.is_empty() {
            return Health::NotConfigured(
                "no servers: add [[mcp.servers]] to the config".to_owned(),
            );
        }
        match summary(self) {
            Health::Broken(why)
                if self
                    .servers
                    .iter()
                    .all(|s| matches!(*upstream::lock(&s.listing), Listing::Unreachable(_))) =>
            {
                Health::NotConfigured(why)
            }
            Health::Broken(why) => {
                Health::Ready(format!("{}; not served: {why}", ready_part(self)))
            }
            health => health,
        }
    }

    /// While a server has not been listed since start: a task of one of
    /// its tools (left from before a restart) waits for it.
    fn tools_pending(&self) -> bool {
        self.servers
            .iter()
            .any(|s| matches!(*upstream::lock(&s.listing), Listing::Unreachable(_)))
    }

    fn tools(&self) -> Vec<ToolSpec> {
        let mut specs = Vec::new();
        let mut servers: Vec<&Arc<Server>> = self.servers.iter().collect();
        servers.sort_by_key(|server| match server.first_listed.load(Ordering::Relaxed) {
            0 => u64::MAX,
            order => order,
        });
        for server in servers {
            let settings = &server.upstream.settings;
            let listing = upstream::lock(&server.listing);
            let Listing::Tools { tools, .. } = &*listing else {
                continue;
            };
            for (tool, repeatable) in served(settings, tools) {
                let name = prefixed(settings, &tool.name);
                let mut served_tool = tool.clone();
                served_tool.name = name.clone().into();
                let job = UpstreamToolJob {
                    upstream: server.upstream.clone(),
                    calls: self.calls.clone(),
                    permits: server.permits.clone(),
                    tool: tool.name.to_string(),
                    repeatable,
                };
                let description = tool.description.clone().unwrap_or_default();
                // A step follows its call for at most FOLLOW (10 s); the
                // engine's step timeout stays its default.
                specs.push(
                    ToolSpec::new(name, description, ToolPolicy::default(), job)
                        .with_tool(served_tool),
                );
            }
        }
        specs
    }

    fn run(&self, nudge: Nudge, shutdown: CancellationToken) -> BoxFuture<'static, ()> {
        let calls = self.calls.clone();
        let followers: Vec<_> = self
            .servers
            .iter()
            .filter(|server| server.to_follow())
            .map(|server| follow::follow(server.clone(), nudge.clone(), shutdown.clone()))
            .collect();
        Box::pin(async move {
            let sweep = async {
                loop {
                    tokio::select! {
                        () = shutdown.cancelled() => return,
                        () = tokio::time::sleep(SWEEP_EVERY) => calls.sweep(),
                    }
                }
            };
            tokio::join!(sweep, futures::future::join_all(followers));
        })
    }

    fn check(&self) -> BoxFuture<'_, Health> {
        Box::pin(async move {
            if self.servers.is_empty() {
                return Health::NotConfigured(
                    "no servers: add [[mcp.servers]] to the config".to_owned(),
                );
            }
            summary(self)
        })
    }
}

/// "name: N tool(s)" for each server whose tools were listed.
fn ready_part(backend: &McpBackend) -> String {
    backend
        .listing()
        .into_iter()
        .filter_map(|(server, listing)| {
            listing
                .ok()
                .map(|tools| format!("{server}: {} tool(s)", tools.len()))
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Ready with every server's tool count, or Broken naming each server that
/// could not be listed and why.
fn summary(backend: &McpBackend) -> Health {
    let broken: Vec<String> = backend
        .listing()
        .into_iter()
        .filter_map(|(_, listing)| listing.err())
        .collect();
    if broken.is_empty() {
        Health::Ready(ready_part(backend))
    } else {
        Health::Broken(broken.join("; "))
    }
}

/// Built from the `[mcp]` table.
impl ConfiguredBackend for McpBackend {
    const NAME: &'static str = SECTION;
    type Config = McpConfig;

    async fn from_config(
        config: McpConfig,
        upstream: UpstreamMetrics,
    ) -> Result<Self, Box<dyn std::error::Error + Send + Sync>> {
        Ok(McpBackend::from_config(config, upstream).await?)
    }
}
