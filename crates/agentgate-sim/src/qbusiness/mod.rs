//! A wire-faithful Amazon Q Business emulator: a real HTTP server that the unmodified
//! `aws-sdk-qbusiness` client talks to (restJson1, SigV4-verified), serving ChatSync,
//! ListConversations, ListMessages and DeleteConversation of one application.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use agentgate_sim::qbusiness::{QBusinessConfig, QBusinessSim, serve};
//! let sim = QBusinessSim::new(QBusinessConfig::default());
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
//! let endpoint = format!("http://{}", listener.local_addr()?);
//! let shutdown = tokio_util::sync::CancellationToken::new();
//! tokio::spawn(serve(listener, sim.router(), shutdown.clone()));
//! // point the SDK at `endpoint` with DEFAULT_ACCESS_KEY_ID / DEFAULT_SECRET_ACCESS_KEY
//! sim.faults().script(["ThrottlingException", "ok"]);
//! # Ok(()) }
//! ```
//!
//! Layout:
//! - `routes`: the routes and the front door (latency, SigV4, `x-amzn-RequestId`);
//! - `sigv4`: signature verification with the official `aws-sigv4` signer;
//! - `chat`: the ChatSync flow, idempotency included;
//! - `request`: query and body parsing, the model's constraints;
//! - `answer` and `corpus`: BM25 retrieval over the shipped documents, citations;
//! - `filter`: `attributeFilter`;
//! - `plugins`: the ticket plugin and the sign-in (Calendar) plugin;
//! - `identity_center`: IAM Identity Center's `CreateTokenWithIAM` and STS's
//!   `AssumeRole` with an identity context, for identity-aware sessions;
//! - `faults`: latency and injected failures;
//! - `errors`: AWS error shapes; `wire`: response shapes; `state`, `ids`.

mod answer;
mod chat;
mod corpus;
mod errors;
mod faults;
mod filter;
mod identity_center;
mod ids;
mod plugins;
mod request;
mod routes;
mod sigv4;
mod state;
mod wire;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub use answer::{DATASOURCE_ID, INDEX_ID, MAX_SYSTEM_MESSAGE, NO_ANSWER};
pub use corpus::{Bm25, Corpus, Document};
pub use errors::{ApiError, FieldError};
pub use faults::{Faults, ScriptedFault, UnknownFault};
pub use identity_center::{
    IDENTITY_CENTER_PROVIDER, IdentityCenterConfig, IssuedSession, JWT_BEARER_GRANT, OPERATOR_ARN,
};
pub use plugins::{SIGNIN_PLUGIN_ID, TICKET_PLUGIN_ID, Ticket};
pub use routes::MAX_BODY;

/// The application id the emulator serves by default (36 characters, the service's
/// `[a-zA-Z0-9][a-zA-Z0-9-]{35}` pattern).
pub const DEFAULT_APPLICATION_ID: &str = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d";
/// The access key id accepted by default.
pub const DEFAULT_ACCESS_KEY_ID: &str = "AKIDAGENTGATESIM0001";
/// The secret access key accepted by default.
pub const DEFAULT_SECRET_ACCESS_KEY: &str = "AgentgateSimSecretKeyForLocalTestingOnly";
/// The region the credential scope must name by default.
pub const DEFAULT_REGION: &str = "us-east-1";

/// How an emulator is set up. `Debug` redacts the secret.
#[derive(Clone)]
pub struct QBusinessConfig {
    /// The one application served; other ids get `ResourceNotFoundException`.
    pub application_id: String,
    /// The access key id requests must be signed with.
    pub access_key_id: String,
    /// Its secret.
    pub secret_access_key: String,
    /// The region of the credential scope.
    pub region: String,
    /// Fixed latency added to every API request.
    pub latency: Duration,
    /// Random extra latency, uniform in `0..=latency_jitter`.
    pub latency_jitter: Duration,
    /// Base URL of the sign-in page in `authorizationUrl` (no trailing slash needed).
    /// `None`: `http://` plus the `Host` the client used, i.e. the listener address.
    pub public_base_url: Option<String>,
    /// Whether a repeated ChatSync `clientToken` gets the first answer again
    /// (see `chat.rs`). The service model marks the token an idempotency token
    /// but documents neither the replay nor what a repeated `actionExecution`
    /// does; `false` is the conservative reading, in which every request is a
    /// new turn and a repeated action runs again.
    pub client_token_replay: bool,
    /// Identity Center and STS, for identity-aware sessions; `None` serves
    /// neither (`InvalidClientException`, `AccessDenied`).
    pub identity_center: Option<IdentityCenterConfig>,
}

impl std::fmt::Debug for QBusinessConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QBusinessConfig")
            .field("application_id", &self.application_id)
            .field("access_key_id", &self.access_key_id)
            .field("secret_access_key", &"<redacted>")
            .field("region", &self.region)
            .field("latency", &self.latency)
            .field("latency_jitter", &self.latency_jitter)
            .field("public_base_url", &self.public_base_url)
            .field("client_token_replay", &self.client_token_replay)
            .field("identity_center", &self.identity_center)
            .finish()
    }
}

impl Default for QBusinessConfig {
    fn default() -> Self {
        Self {
            application_id: DEFAULT_APPLICATION_ID.into(),
            access_key_id: DEFAULT_ACCESS_KEY_ID.into(),
            secret_access_key: DEFAULT_SECRET_ACCESS_KEY.into(),
            region: DEFAULT_REGION.into(),
            latency: Duration::ZERO,
            latency_jitter: Duration::ZERO,
            public_base_url: None,
            client_token_replay: true,
            identity_center: None,
        }
    }
}

/// Counters, as a snapshot from [`QBusinessSim::stats`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// ChatSync requests that passed authentication and reached the handler, injected
    /// failures and invalid requests included.
    pub chat_sync_requests: u64,
    /// ChatSync requests that produced a turn (replays of a clientToken do not count).
    pub chat_sync_effects: u64,
    /// Tickets created by the ticket plugin.
    pub tickets_created: u64,
    /// Failures injected into ChatSync (scripted or random).
    pub faults_injected: u64,
    /// Successful answers replaced by a 500 after their effect was applied (any API
    /// operation; see [`Faults::set_lost_rate`]).
    pub answers_lost: u64,
    /// The identity (`userId`, `userGroups` query parameters) each ChatSync
    /// request arrived with, in order: what agentgate sent on the wire.
    pub identities: Vec<SeenIdentity>,
    /// `CreateTokenWithIAM` exchanges that returned an identity context.
    pub token_exchanges: u64,
    /// `CreateTokenWithIAM` assertions refused (`InvalidGrantException`).
    pub token_exchanges_refused: u64,
    /// `AssumeRole` calls that returned session credentials.
    pub roles_assumed: u64,
    by_client_token: HashMap<String, u64>,
    effects_by_client_token: HashMap<String, u64>,
}

/// Who a ChatSync request said it was asking for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SeenIdentity {
    pub user_id: Option<String>,
    pub user_groups: Vec<String>,
    /// The Identity Center user of the identity-aware session that signed
    /// the request, if one did.
    pub session_user: Option<String>,
}

impl Stats {
    /// How many ChatSync requests carried `token` as their `clientToken`.
    pub fn requests_by_client_token(&self, token: &str) -> u64 {
        self.by_client_token.get(token).copied().unwrap_or(0)
    }

    /// How many turns `token` produced: at most 1 while idempotency holds.
    pub fn effects_by_client_token(&self, token: &str) -> u64 {
        self.effects_by_client_token
            .get(token)
            .copied()
            .unwrap_or(0)
    }

    /// The largest number of turns any one clientToken produced.
    pub fn max_effects_per_client_token(&self) -> u64 {
        self.effects_by_client_token
            .values()
            .copied()
            .max()
            .unwrap_or(0)
    }
}

/// A Q Business emulator. Cheap to clone; clones share one state.
#[derive(Clone, Debug)]
pub struct QBusinessSim {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    config: QBusinessConfig,
    verifier: sigv4::Verifier,
    corpus: Corpus,
    faults: Faults,
    state: Mutex<state::State>,
}

impl Inner {
    fn state(&self) -> MutexGuard<'_, state::State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The application id must match the pattern, and be the one served.
    fn check_application(&self, application_id: &str) -> Result<(), ApiError> {
        if !ids::is_resource_id(application_id) {
            return Err(ApiError::field(
                "applicationId",
                format!(
                    "Member must satisfy regular expression pattern: {}",
                    ids::ID_PATTERN
                ),
            ));
        }
        if application_id != self.config.application_id {
            return Err(ApiError::not_found(
                errors::RESOURCE_APPLICATION,
                application_id,
            ));
        }
        Ok(())
    }
}

impl QBusinessSim {
    /// An emulator with the shipped Northwind Robotics corpus.
    pub fn new(config: QBusinessConfig) -> Self {
        let faults = Faults::default();
        faults.set_latency(config.latency, config.latency_jitter);
        let verifier = sigv4::Verifier {
            access_key_id: config.access_key_id.clone(),
            secret_access_key: config.secret_access_key.clone(),
            region: config.region.clone(),
        };
        Self {
            inner: Arc::new(Inner {
                config,
                verifier,
                corpus: Corpus::northwind(),
                faults,
                state: Mutex::new(state::State::default()),
            }),
        }
    }

    /// All routes (see the `routes` module docs); serve them with [`serve`].
    pub fn router(&self) -> axum::Router {
        routes::router(self.clone())
    }

    /// The configuration.
    pub fn config(&self) -> &QBusinessConfig {
        &self.inner.config
    }

    /// The fault and latency knobs.
    pub fn faults(&self) -> &Faults {
        &self.inner.faults
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> Stats {
        self.inner.state().stats.clone()
    }

    /// The role sessions STS issued so far.
    pub fn issued_sessions(&self) -> Vec<IssuedSession> {
        self.inner.state().identity.issued()
    }

    /// The tickets created so far, oldest first.
    pub fn tickets(&self) -> Vec<Ticket> {
        self.inner.state().tickets.clone()
    }

    /// The documents the emulator answers from.
    pub fn documents(&self) -> &[Document] {
        self.inner.corpus.documents()
    }
}

/// Serves `router` on `listener` until `shutdown` is cancelled, then finishes the
/// requests in flight.
pub async fn serve(
    listener: TcpListener,
    router: axum::Router,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    axum::serve(listener, router)
        .with_graceful_shutdown(shutdown.cancelled_owned())
        .await
}
