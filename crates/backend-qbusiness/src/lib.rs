//! Amazon Q Business behind MCP: `QBusinessQueryTool`, compatible with the
//! upstream tool of the same name, as a durable agentgate task.
//!
//! - [`settings`]: the environment the tool reads (as upstream) and the SDK client.
//! - [`args`]: the tool's input and its validation; [`filter`]: `attribute_filter`.
//! - [`identity`]: who each principal speaks to Q Business as (never the arguments).
//! - [`sessions`]: identity-aware sessions, Q Business as the OAuth-signed-in user.
//! - [`job`]: the ChatSync state machine (answer, action review, sign-in).
//! - [`review`]: action reviews ↔ elicitation forms.
//! - [`answer`]: the result, with everything ChatSync returned.
//! - [`error`]: failures as messages that say what to fix.
//! - `upstream`: ChatSync requests counted into the gateway's metrics.

pub mod answer;
pub mod args;
pub mod error;
pub mod filter;
pub mod identity;
pub mod job;
pub mod review;
pub mod sessions;
pub mod settings;
mod upstream;

use std::time::Duration;

use agentgate_backend::ToolSpec;
use agentgate_backend::{PollPolicy, ToolPolicy};
use rmcp::model::ToolAnnotations;

pub use job::QBusinessQuery;
pub use settings::Settings;

/// The tool's name, as upstream.
pub const TOOL_NAME: &str = "QBusinessQueryTool";

const DESCRIPTION: &str = "Ask the organisation's Amazon Q Business application a question and \
get an answer grounded in its indexed documents. Use it for questions about internal policies, \
processes, systems and people that the company's documents cover. Returns the answer as text \
starting with 'Qbiz response: ', the cited sources as resource links, and structured content with \
the citations (which answer segments each source supports) and the conversationId / \
systemMessageId to pass as conversation_id / parent_message_id for a follow-up in the same \
conversation. With chat_mode PLUGIN_MODE and a plugin_id, Q Business can propose actions in \
other systems (e.g. open a ticket); they are only executed after the user approves the form it \
shows, and a plugin that needs the user to sign in asks for that first.";

/// `QBusinessQueryTool` with its policy: an answer usually takes seconds, so
/// clients without tasks wait up to two minutes inline; a task waits up to a
/// day for an action approval.
pub fn tool(job: QBusinessQuery) -> ToolSpec {
    let policy = ToolPolicy::default()
        .ttl(Some(Duration::from_secs(24 * 3600)))
        .poll(
            PollPolicy::default()
                .working(Duration::from_millis(500))
                .input_required(Duration::from_secs(2))
                .grow_every(Some(Duration::from_secs(60)))
                .max(Duration::from_secs(10)),
        )
        .sync_budget(Duration::from_secs(120))
        .step_timeout(Duration::from_secs(180))
        .sync_fallback(true);
    let spec = ToolSpec::new(TOOL_NAME, DESCRIPTION, policy, job);
    let mut tool = spec.tool.clone();
    tool.output_schema = Some(rmcp::handler::server::common::schema_for_type::<
        answer::StructuredAnswer,
    >());
    tool.annotations = Some(
        ToolAnnotations::new()
            .read_only(false)
            .destructive(false)
            .idempotent(false)
            .open_world(true),
    );
    tool.title = Some("Ask Amazon Q Business".to_owned());
    spec.with_tool(tool)
}

/// For embedding: the tool reading its settings from the environment.
pub fn tool_from_env() -> ToolSpec {
    tool(QBusinessQuery::from_env())
}

/// The `[qbusiness]` table of the config file: who each principal speaks to
/// Q Business as (see [`identity`]). The application and the credentials
/// come from the environment (`AWS_REGION`, `QBUSINESS_APPLICATION_ID`,
/// `AWS_PROFILE`), as upstream reads them; an unknown key is refused by name.
#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QBusinessConfig {
    /// Send the caller's `user_id` / `user_groups` arguments upstream: only
    /// for a gateway that serves one person. Off by default.
    #[serde(default)]
    pub trust_caller_identity: bool,
    /// Principal → Q Business identity.
    #[serde(default)]
    pub users: std::collections::BTreeMap<String, identity::UserIdentity>,
    /// Identity-aware sessions for OAuth principals (see [`sessions`]).
    #[serde(default)]
    pub identity_center: Option<sessions::IdentityCenter>,
}

impl QBusinessConfig {
    fn identities(&self) -> identity::Identities {
        identity::Identities {
            trust_caller: self.trust_caller_identity,
            users: self.users.clone(),
        }
    }
}

/// Built from the environment and the identities of `[qbusiness]`.
impl agentgate_backend::ConfiguredBackend for QBusinessQuery {
    const NAME: &'static str = "qbusiness";
    type Config = QBusinessConfig;

    fn check_config(
        config: &QBusinessConfig,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        config.identities().check()?;
        if let Some(center) = &config.identity_center {
            center.check()?;
            if config.trust_caller_identity || !config.users.is_empty() {
                return Err("qbusiness.identity_center cannot be combined with \
                            qbusiness.users or qbusiness.trust_caller_identity: with \
                            identity-aware sessions, the identity is the signed-in user's \
                            session, never a user id. Remove one of them."
                    .into());
            }
        }
        Ok(())
    }

    async fn from_config(
        config: QBusinessConfig,
        upstream: agentgate_backend::UpstreamMetrics,
    ) -> Result<Self, Box<dyn std::error::Error + Send + Sync>> {
        let sessions = config
            .identity_center
            .clone()
            .map(|center| sessions::IdentitySessions::new(center, Some(upstream.clone())));
        let query = QBusinessQuery::from_env()
            .with_upstream_metrics(upstream)
            .with_identities(config.identities());
        Ok(match sessions {
            Some(sessions) => query.with_sessions(sessions),
            None => query,
        })
    }
}

/// The backend: one tool, no background work (ChatSync answers each call);
/// with identity-aware sessions, each OAuth request renews its principal's.
impl agentgate_backend::Backend for QBusinessQuery {
    fn tools(&self) -> Vec<ToolSpec> {
        vec![tool(self.clone())]
    }

    fn setup(&self) -> agentgate_backend::Health {
        self.configured()
    }

    fn check(&self) -> agentgate_backend::BoxFuture<'_, agentgate_backend::Health> {
        Box::pin(self.health())
    }

    fn principal_request<'a>(
        &'a self,
        owner: &'a agentgate_backend::Owner,
        token: &'a agentgate_backend::AccessToken,
    ) -> agentgate_backend::BoxFuture<'a, ()> {
        Box::pin(self.renew_session(owner, token))
    }
}
