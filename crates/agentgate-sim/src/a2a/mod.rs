//! An Agent2Agent (A2A) protocol **v1.0** agent emulator: a real HTTP server speaking
//! the JSON-RPC binding (§9 of the specification, `contracts/a2a/`) with scripted
//! agents, for the tests of an A2A backend and `agentgate sim`.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use agentgate_sim::a2a::{A2aConfig, A2aSim, serve};
//! let sim = A2aSim::new(A2aConfig::default());
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
//! let endpoint = format!("http://{}/", listener.local_addr()?);
//! let shutdown = tokio_util::sync::CancellationToken::new();
//! tokio::spawn(serve(listener, sim.router(), shutdown.clone()));
//! // POST JSON-RPC to `endpoint` with `A2A-Version: 1.0`; the card is at
//! // /.well-known/agent-card.json
//! sim.faults().lose_next_answers(1);
//! # Ok(()) }
//! ```
//!
//! Data flow: `routes` checks the bearer token (or an `oauth` access token) and the
//! `A2A-Version` header, parses the JSON-RPC envelope and hands it to `rpc`, which
//! parses the params into `wire` types and runs the method; `send` starts or continues
//! tasks in the `store` and spawns the `agents` script that drives each task; answers
//! are JSON, or SSE from `stream` for the streaming methods; `push` POSTs each task
//! event to the task's webhooks. `faults` can fail, lose or cut answers and drop
//! pushes.
//!
//! Behaviour the specification leaves open, and what the emulator does:
//! - **messageId idempotency** (§3.3.1: SendMessage MAY be idempotent; agents may use
//!   the messageId to detect duplicates). With [`A2aConfig::dedupe_message_ids`] (the
//!   default) a messageId seen before starts nothing: the call answers with that
//!   message's task as it is now (blocking calls wait for it to settle) or its direct
//!   reply. Off, every send is a new run, as the official Python SDK's server does
//!   (`a2a_interop.rs` proves it): a backend must not count on deduplication by real
//!   agents. [`A2aStats::effects_by_message_id`] counts runs started or continued, so
//!   a test sees a duplicate either way.
//! - **Streams** close after a terminal state or INPUT_REQUIRED (as the official
//!   Python SDK does) and stay open through AUTH_REQUIRED (§7.6.1 SHOULD).
//! - **A message to a task** that is not waiting (WORKING/SUBMITTED) is refused with
//!   UnsupportedOperation (-32004); to a terminal task, -32004 too (§3.1.1); with a
//!   contextId other than the task's, -32602.
//! - **History** holds the user's messages and the agent's earlier status messages,
//!   oldest first; the current status message is in `status` only (as the official
//!   Python SDK keeps it).
//! - **Tenant** fields are accepted and ignored (the card declares no tenant).
//! - **Client-provided contextIds** (§3.4.1: agents MAY accept them) are accepted and
//!   kept, as the official Python SDK's server does; with
//!   [`A2aConfig::accept_client_context_ids`] off, a contextId the emulator did not
//!   generate is refused with -32602 naming `message.contextId` (the MUST of §3.4.1).
//! - **OAuth** ([`A2aConfig::oauth`]): a client-credentials token endpoint at
//!   [`TOKEN_PATH`] (`oauth`), declared in the card.
//! - **Push notifications** ([`A2aConfig::push_notifications`]): what `push`'s module
//!   docs say (the `token` header, no screening of loopback webhook URLs).

mod agents;
mod card;
mod errors;
mod faults;
mod ids;
mod push;
mod routes;
mod rpc;
mod send;
mod store;
mod stream;
mod wire;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub use crate::oauth::{OAUTH_SCHEME, OAuthClient, TOKEN_PATH};
pub use agents::Skill;
pub use card::{AGENT_CARD_PATH, BEARER_SCHEME};
pub use faults::A2aFaults;

/// The one scope the emulated agent's token endpoint knows.
pub const OAUTH_SCOPE: &str = "a2a.invoke";
pub use push::NOTIFICATION_TOKEN_HEADER;

/// The protocol version served (`A2A-Version` must name it).
pub const PROTOCOL_VERSION: &str = "1.0";

/// How an emulator is set up. `Debug` redacts the token.
#[derive(Clone)]
pub struct A2aConfig {
    /// The card's `name`.
    pub name: String,
    /// When set, every JSON-RPC request must carry `Authorization: Bearer <token>`
    /// (else 401); the card stays public and declares the scheme.
    pub token: Option<String>,
    /// Further bearer tokens accepted like `token` (one per user of a shared
    /// agent). The emulator does not scope tasks to them.
    pub user_tokens: Vec<String>,
    /// The pause between progress steps of `long-running` and `refuses-cancel`.
    pub step_delay: Duration,
    /// Whether a repeated messageId answers with what it produced before instead of
    /// starting again (see the module docs).
    pub dedupe_message_ids: bool,
    /// Origin of the card's interface URL and of sign-in URLs (no trailing slash).
    /// `None`: `http://` plus the request's `Host`.
    pub public_base_url: Option<String>,
    /// An OAuth 2.0 client: the card then asks for the client-credentials flow and
    /// JSON-RPC needs an access token from [`TOKEN_PATH`] (a configured `token` is
    /// accepted too).
    pub oauth: Option<OAuthClient>,
    /// Serve push notifications (`capabilities.pushNotifications`); off, the push
    /// methods answer PushNotificationNotSupported (-32003).
    pub push_notifications: bool,
    /// Accept a contextId the client chose (§3.4.1 MAY); off, refuse it.
    pub accept_client_context_ids: bool,
}

impl std::fmt::Debug for A2aConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("A2aConfig")
            .field("name", &self.name)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("user_tokens", &self.user_tokens.len())
            .field("step_delay", &self.step_delay)
            .field("dedupe_message_ids", &self.dedupe_message_ids)
            .field("public_base_url", &self.public_base_url)
            .field("oauth", &self.oauth)
            .field("push_notifications", &self.push_notifications)
            .field("accept_client_context_ids", &self.accept_client_context_ids)
            .finish()
    }
}

impl Default for A2aConfig {
    fn default() -> Self {
        Self {
            name: "agentgate A2A emulator".into(),
            token: None,
            user_tokens: Vec::new(),
            step_delay: Duration::from_millis(200),
            dedupe_message_ids: true,
            public_base_url: None,
            oauth: None,
            push_notifications: false,
            accept_client_context_ids: true,
        }
    }
}

/// Counters, as a snapshot from [`A2aSim::stats`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct A2aStats {
    /// JSON-RPC requests that passed authentication and the version check.
    pub rpc_requests: u64,
    /// Requests failed by [`A2aFaults::fail_next`].
    pub faults_injected: u64,
    /// SendMessage answers replaced by a 500 after their effect.
    pub answers_lost: u64,
    /// Streams cut by [`A2aFaults::drop_next_streams`].
    pub streams_dropped: u64,
    /// SSE streams opened (SendStreamingMessage, SubscribeToTask).
    pub streams_opened: u64,
    /// SSE streams open now.
    pub open_streams: u64,
    /// The most SSE streams that were open at once.
    pub max_open_streams: u64,
    /// CancelTask calls that canceled a task.
    pub cancels: u64,
    /// Requests refused 401 (no, a wrong or an expired token).
    pub unauthorized: u64,
    /// Access tokens the token endpoint issued.
    pub tokens_issued: u64,
    /// Token requests the endpoint refused.
    pub token_errors: u64,
    /// Webhook POSTs tried, including retries.
    pub push_attempts: u64,
    /// Notifications a webhook took (2xx).
    pub pushes_delivered: u64,
    /// Notifications given up after every retry failed.
    pub pushes_failed: u64,
    /// Notifications skipped by [`A2aFaults::drop_next_pushes`].
    pub pushes_dropped: u64,
    sends_by_message_id: HashMap<String, u64>,
    effects_by_message_id: HashMap<String, u64>,
    pub(crate) tasks_by_context_id: HashMap<String, u64>,
    pub(crate) lists_by_context_id: HashMap<String, u64>,
}

impl A2aStats {
    /// How many SendMessage/SendStreamingMessage calls carried this messageId.
    pub fn sends_by_message_id(&self, message_id: &str) -> u64 {
        self.sends_by_message_id
            .get(message_id)
            .copied()
            .unwrap_or(0)
    }

    /// How many runs this messageId started or continued: at most 1.
    pub fn effects_by_message_id(&self, message_id: &str) -> u64 {
        self.effects_by_message_id
            .get(message_id)
            .copied()
            .unwrap_or(0)
    }

    /// How many tasks were created in this contextId.
    pub fn tasks_in_context(&self, context_id: &str) -> u64 {
        self.tasks_by_context_id
            .get(context_id)
            .copied()
            .unwrap_or(0)
    }

    /// How many ListTasks calls filtered by this contextId.
    pub fn lists_of_context(&self, context_id: &str) -> u64 {
        self.lists_by_context_id
            .get(context_id)
            .copied()
            .unwrap_or(0)
    }

    /// The largest number of tasks any contextId got.
    pub fn max_tasks_per_context(&self) -> u64 {
        self.tasks_by_context_id
            .values()
            .copied()
            .max()
            .unwrap_or(0)
    }

    /// How many messageIds had an effect.
    pub fn effects_by_message_id_count(&self) -> usize {
        self.effects_by_message_id.len()
    }

    /// The largest number of effects any messageId had.
    pub fn max_effects_per_message_id(&self) -> u64 {
        self.effects_by_message_id
            .values()
            .copied()
            .max()
            .unwrap_or(0)
    }
}

/// An A2A emulator. Cheap to clone; clones share one state.
#[derive(Clone, Debug)]
pub struct A2aSim {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    config: A2aConfig,
    faults: A2aFaults,
    store: Mutex<store::Store>,
    /// Sends push notifications.
    http: reqwest::Client,
}

impl Inner {
    fn store(&self) -> MutexGuard<'_, store::Store> {
        self.store.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl A2aSim {
    /// An emulator with no tasks.
    pub fn new(config: A2aConfig) -> Self {
        Self {
            inner: Arc::new(Inner {
                config,
                faults: A2aFaults::default(),
                store: Mutex::new(store::Store::default()),
                http: reqwest::Client::builder()
                    .timeout(push::TIMEOUT)
                    .redirect(reqwest::redirect::Policy::none())
                    .build()
                    .unwrap_or_default(),
            }),
        }
    }

    /// All routes: the card, JSON-RPC at `/`, the sign-in page `/auth/{taskId}`, and
    /// the OAuth token endpoint [`TOKEN_PATH`].
    pub fn router(&self) -> axum::Router {
        routes::router(self.clone())
    }

    /// The configuration.
    pub fn config(&self) -> &A2aConfig {
        &self.inner.config
    }

    /// The fault knobs.
    pub fn faults(&self) -> &A2aFaults {
        &self.inner.faults
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> A2aStats {
        self.inner.store().stats.clone()
    }

    /// Makes every issued access token invalid, as a token store that lost them or
    /// a key rotation would: the next JSON-RPC call with one is refused 401.
    pub fn revoke_tokens(&self) {
        self.inner.store().tokens.revoke_all();
    }

    /// Completes the out-of-band sign-in of a `needs-auth` task, as a GET of its
    /// sign-in URL does. False when no such task waits for one.
    pub fn sign_in(&self, task_id: &str) -> bool {
        let store = self.inner.store();
        match store.tasks.get(task_id) {
            Some(record) if record.task.status.state == wire::TaskState::AuthRequired => {
                record.signed_in.notify_one();
                true
            }
            _ => false,
        }
    }
}

/// Serves `router` on `listener` until `shutdown` is cancelled. Open SSE streams end
/// with the shutdown.
pub async fn serve(
    listener: TcpListener,
    router: axum::Router,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    axum::serve(listener, router)
        .with_graceful_shutdown(shutdown.cancelled_owned())
        .await
}
