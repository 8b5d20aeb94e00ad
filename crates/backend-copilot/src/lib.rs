//! The GitHub Copilot cloud agent behind MCP, as durable agentgate tasks.
//!
//! Three tools:
//! - `assign_copilot_to_issue` (compatible with github-mcp-server's tool of
//!   the same name) follows the agent from the assignment to its finished
//!   pull request;
//! - `request_copilot_changes` posts an `@copilot` comment on a pull request
//!   and follows the work cycle it starts;
//! - `create_pull_request_with_copilot` starts an agent task (Agent tasks
//!   REST API) and follows it to its end.
//!
//! Layout (only [`github`] and [`watcher`] are public, for the contract
//! tests and the benchmark; the rest is re-exported by name where needed):
//! - [`settings`]: environment (token, API URL) and the `[copilot]` knobs;
//! - [`access`]: the repositories each principal may touch, and its own token;
//! - [`github`]: the HTTP client, GitHub's errors and rate limits, the
//!   GraphQL documents and response shapes;
//! - [`watcher`]: one poller per instance for every watched issue, PR and
//!   agent task, batching GraphQL with aliases;
//! - [`assign`], [`changes`], [`agent_task`]: the three jobs;
//! - [`args`]: inputs and validation; [`report`]: results.
//!
//! GitHub has no API to stop a running Copilot session: cancelling a task
//! stops the watch (and, with `unassign_on_cancel`, unassigns Copilot).

mod access;
mod agent_task;
mod args;
mod assign;
mod changes;
mod follow;
pub mod github;
mod report;
mod settings;
pub mod watcher;

use std::sync::Arc;
use std::time::Duration;

use agentgate_backend::{
    Backend, BoxFuture, ConfiguredBackend, Nudge, PollPolicy, ToolPolicy, ToolSpec, UpstreamMetrics,
};
use rmcp::model::{JsonObject, ToolAnnotations};
use tokio_util::sync::CancellationToken;

pub use settings::{CopilotConfig, Endpoint, SettingsError, Token};
pub use watcher::CopilotWatcher;

use github::GitHub;

pub const ASSIGN_TOOL: &str = "assign_copilot_to_issue";
pub const CHANGES_TOOL: &str = "request_copilot_changes";
pub const CREATE_PR_TOOL: &str = "create_pull_request_with_copilot";

/// The Agent tasks API's version header.
pub const AGENT_TASKS_API_VERSION: &str = "2026-03-10";

/// What every Copilot job of an instance shares.
#[derive(Debug)]
pub(crate) struct Shared {
    github: GitHub,
    watcher: Arc<CopilotWatcher>,
    config: CopilotConfig,
    access: access::Access,
}

impl Shared {
    /// The client the task's owner uses on `owner/repo`, or the tool error
    /// that refuses it before any request (see [`access`]).
    fn github_for(
        &self,
        cx: &agentgate_backend::JobContext,
        owner: &str,
        repo: &str,
    ) -> Result<&GitHub, String> {
        self.access.github_for(&self.github, &cx.owner, owner, repo)
    }
}

/// How long a watching task sleeps between its own steps when nothing
/// changes. The watcher nudges it earlier on a change; this only bounds how
/// soon another instance takes the watch over after this one dies.
pub(crate) fn refresh_after(age: Duration) -> Duration {
    if age < Duration::from_secs(120) {
        Duration::from_secs(10)
    } else {
        Duration::from_secs(30)
    }
}

/// The Copilot backend of one instance: its tools and its watcher.
#[derive(Debug, Clone)]
pub struct Copilot {
    shared: Arc<Shared>,
}

const ASSIGN_DESCRIPTION: &str = "Assign Copilot to a specific issue in a GitHub repository.\n\nThis tool can help with the following outcomes:\n- a Pull Request created with source code changes to resolve the issue\n\n\nMore information can be found at:\n- https://docs.github.com/en/copilot/concepts/agents/cloud-agent/about-cloud-agent\n\nWith the MCP tasks extension, the call returns a task at once that follows Copilot until its pull request is finished (or fails); its status message says what Copilot is doing. Cancelling the task stops the watch; GitHub has no API to stop a running Copilot session.\n";

const CHANGES_DESCRIPTION: &str = "Ask Copilot to change a pull request it opened: posts your instructions as an @copilot comment on the pull request and follows the work cycle it starts until Copilot finishes (or fails). Returns a task with the MCP tasks extension. Cancelling stops the watch only: GitHub has no API to stop a running Copilot session.";

const CREATE_PR_DESCRIPTION: &str = "Perform task with GitHub Copilot coding agent: starts a Copilot agent task in the repository that works on the problem statement and opens a pull request, and follows it until it is completed, failed, timed out or cancelled. Returns a task with the MCP tasks extension. Cancelling stops the watch only: GitHub has no API to stop a running agent task.";

impl Copilot {
    /// The backend for `endpoint`, with `config`'s knobs.
    pub fn new(endpoint: Endpoint, config: CopilotConfig) -> Self {
        Self::with_github(GitHub::new(endpoint), config)
    }

    fn with_github(github: GitHub, config: CopilotConfig) -> Self {
        let watcher = Arc::new(CopilotWatcher::new(github.clone(), Self::poll(&config)));
        let access =
            access::Access::new(&config.principals, &github, |name| std::env::var(name).ok());
        Self {
            shared: Arc::new(Shared {
                github,
                watcher,
                config,
                access,
            }),
        }
    }

    /// Reads `GITHUB_API_URL` and `GITHUB_PERSONAL_ACCESS_TOKEN`.
    pub fn from_env(config: CopilotConfig) -> Result<Self, SettingsError> {
        Ok(Self::new(Endpoint::from_env()?, config))
    }

    /// The same backend, counting every GitHub request into `upstream`.
    /// Call it before handing out tools or starting the watcher: they keep
    /// the client they were given.
    pub fn with_upstream_metrics(self, upstream: UpstreamMetrics) -> Self {
        let github = self.shared.github.clone().with_upstream_metrics(upstream);
        Self::with_github(github, self.shared.config.clone())
    }

    fn poll(config: &CopilotConfig) -> PollPolicy {
        PollPolicy::default()
            .working(Duration::from_millis(config.poll_min_ms))
            .input_required(Duration::from_secs(2))
            .grow_every(Some(Duration::from_secs(config.poll_grow_seconds)))
            .max(Duration::from_secs(config.poll_max_seconds))
    }

    fn policy(&self) -> ToolPolicy {
        let config = &self.shared.config;
        ToolPolicy::default()
            .ttl(Some(config.max_watch() + Duration::from_secs(24 * 3600)))
            .poll(Self::poll(config))
            .sync_budget(Duration::from_secs(60))
            .step_timeout(Duration::from_secs(120))
            .sync_fallback(true)
    }

    pub fn watcher(&self) -> &Arc<CopilotWatcher> {
        &self.shared.watcher
    }

    /// The three tools.
    pub fn tools(&self) -> Vec<ToolSpec> {
        let annotations = |title: &str, idempotent: bool| {
            ToolAnnotations::with_title(title)
                .read_only(false)
                .destructive(false)
                .idempotent(idempotent)
                .open_world(true)
        };
        let assign = ToolSpec::new(
            ASSIGN_TOOL,
            ASSIGN_DESCRIPTION,
            self.policy(),
            assign::AssignCopilot::new(self.shared.clone()),
        )
        .with_sync_view(assign::UpstreamView);
        let changes = ToolSpec::new(
            CHANGES_TOOL,
            CHANGES_DESCRIPTION,
            self.policy(),
            changes::RequestChanges::new(self.shared.clone()),
        );
        let create = ToolSpec::new(
            CREATE_PR_TOOL,
            CREATE_PR_DESCRIPTION,
            self.policy(),
            agent_task::CreatePullRequest::new(self.shared.clone()),
        );
        let mut assign = with_schema(
            assign,
            args::assign_schema(),
            annotations("Assign Copilot to issue", true),
        );
        let mut tool = assign.tool.clone();
        if let serde_json::Value::Object(map) = args::assign_output_schema() {
            tool.output_schema = Some(Arc::new(JsonObject::from_iter(map)));
        }
        assign = assign.with_tool(tool);
        vec![
            assign,
            with_schema(
                changes,
                args::changes_schema(),
                annotations("Ask Copilot for changes", false),
            ),
            with_schema(
                create,
                args::create_pr_schema(),
                annotations("Create a pull request with Copilot", false),
            ),
        ]
    }
}

/// Built from the `[copilot]` table and `GITHUB_API_URL` /
/// `GITHUB_PERSONAL_ACCESS_TOKEN`.
impl ConfiguredBackend for Copilot {
    const NAME: &'static str = "copilot";
    const METRICS_LABEL: &'static str = "github";
    type Config = CopilotConfig;

    fn check_config(
        config: &CopilotConfig,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        Ok(config.validate()?)
    }

    async fn from_config(
        config: CopilotConfig,
        upstream: UpstreamMetrics,
    ) -> Result<Self, Box<dyn std::error::Error + Send + Sync>> {
        Ok(Copilot::from_env(config)?.with_upstream_metrics(upstream))
    }
}

/// The backend: its tools, and the watcher as its background work.
impl Backend for Copilot {
    fn tools(&self) -> Vec<ToolSpec> {
        Copilot::tools(self)
    }

    /// Ready with the gateway's token, or with principals' own tokens.
    fn setup(&self) -> agentgate_backend::Health {
        use agentgate_backend::Health;
        let endpoint = self.watcher().github().endpoint();
        let own = self.shared.access.principals_with_tokens();
        match (&endpoint.token, own) {
            (Some(_), 0) => Health::Ready(format!("GitHub at {}", endpoint.rest)),
            (Some(_), n) => Health::Ready(format!(
                "GitHub at {}; {n} principal(s) with a token of their own",
                endpoint.rest
            )),
            (None, 0) => Health::NotConfigured(
                "GITHUB_PERSONAL_ACCESS_TOKEN is not set: set it to a GitHub token (or give \
                 principals their own with [copilot.principals.\"…\"] token_env)"
                    .to_owned(),
            ),
            (None, n) => Health::Ready(format!(
                "GitHub at {}; only the {n} principal(s) with a token of their own \
                 (GITHUB_PERSONAL_ACCESS_TOKEN is not set)",
                endpoint.rest
            )),
        }
    }

    fn run(&self, nudge: Nudge, shutdown: CancellationToken) -> BoxFuture<'static, ()> {
        let watcher = self.shared.watcher.clone();
        Box::pin(watcher.run(nudge, shutdown))
    }

    /// The token is there, and GitHub says whose it is (`GET /user`).
    fn check(&self) -> BoxFuture<'_, agentgate_backend::Health> {
        use agentgate_backend::Health;
        Box::pin(async move {
            let github = self.watcher().github();
            if github.endpoint().token.is_none() {
                return Health::NotConfigured(
                    "GITHUB_PERSONAL_ACCESS_TOKEN is not set: the Copilot tools refuse every \
                     call until it is"
                        .to_owned(),
                );
            }
            #[derive(serde::Deserialize)]
            struct User {
                login: String,
            }
            match github.rest_get::<User>("user", &[], None).await {
                Ok(user) => Health::Ready(format!(
                    "GitHub at {} answers the token as @{}",
                    github.endpoint().rest,
                    user.login
                )),
                Err(e) => Health::Broken(format!(
                    "GitHub at {} did not accept the token: {e}",
                    github.endpoint().rest
                )),
            }
        })
    }
}

fn with_schema(
    spec: ToolSpec,
    schema: serde_json::Value,
    annotations: ToolAnnotations,
) -> ToolSpec {
    let mut tool = spec.tool.clone();
    if let serde_json::Value::Object(map) = schema {
        tool.input_schema = Arc::new(JsonObject::from_iter(map));
    }
    tool.annotations = Some(annotations);
    tool.title = tool.annotations.as_ref().and_then(|a| a.title.clone());
    spec.with_tool(tool)
}
