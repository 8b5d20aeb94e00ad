//! Reaching one upstream MCP server with rmcp's client: a connection per
//! call, and the client side of that connection ([`CallClient`]), which
//! turns what the server sends during the call into [`CallEvent`]s.
//!
//! ```text
//! Upstream::connect(handler) ─▶ stdio: spawn `command` (empty env + env/pass_env)
//!                               http:  Streamable HTTP to `url` (bearer from the env)
//!                            ─▶ discover (2026-07-28), else initialize (2025-11-25)
//! server ─ notifications/progress ─▶ CallClient ─▶ CallEvent::Progress
//!        ─ elicitation/create     ─▶ CallClient ─▶ CallEvent::Ask (answered later)
//!        ─ sampling/createMessage ─▶ refused, or with `sampling = "caller"`:
//!                                    CallEvent::Sample (the caller's model answers)
//!        ─ roots/list             ─▶ the operator's `roots`, else refused
//! ```
//!
//! One connection per call keeps calls apart: a question or a progress
//! notification can only belong to the call whose connection carried it, so
//! one principal's call never sees another's, and closing the connection
//! ends exactly one call. rmcp bounds what a server may send (16 MiB a
//! message on stdio and HTTP); the engine bounds what a task keeps.

use std::collections::VecDeque;
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

// Sampling and roots are deprecated by SEP-2577, but servers on older
// protocol versions still ask for them: they are refused by name here.
use rmcp::model::{
    ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult, ElicitationCapability,
    ErrorCode, FormElicitationCapability, Implementation, ProgressNotificationParam,
    ProtocolVersion, UrlElicitationCapability,
};
#[allow(deprecated)]
use rmcp::model::{
    CreateMessageRequestParams, CreateMessageResult, ListRootsResult, Root, RootsCapabilities,
    SamplingCapability,
};
use rmcp::service::{
    ClientInitializeError, ClientLifecycleMode, ClientServiceExt as _, NotificationContext, Peer,
    RequestContext, RunningService,
};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, ErrorData, RoleClient};
use tokio::sync::{mpsc, oneshot, watch};

use agentgate_backend::{Owner, UpstreamMetrics, UpstreamOutcome};

use crate::config::{RootConfig, Sampling, ServerSettings, Transport, UpstreamOAuth};
use crate::session::{SavedSession, SessionClient, SessionHandle};

/// Lines of a stdio server's stderr kept to explain why it stopped.
const STDERR_TAIL: usize = 10;

/// What the server sent during a call, for the step following it.
#[derive(Debug)]
pub(crate) enum CallEvent {
    /// `notifications/progress`, as a status message.
    Progress(String),
    /// `elicitation/create`: the question, and where its answer goes.
    Ask(ElicitRequestParams, oneshot::Sender<ElicitResult>),
    /// `sampling/createMessage` for the caller's model: the request, and
    /// where its answer goes (`None`: no usable answer).
    #[allow(deprecated)]
    Sample(
        CreateMessageRequestParams,
        oneshot::Sender<Option<CreateMessageResult>>,
    ),
}

/// The client end of one call's connection.
#[derive(Clone)]
pub(crate) struct CallClient {
    events: Option<mpsc::Sender<CallEvent>>,
    /// Declares the tasks extension: set for HTTP servers, whose tasks
    /// outlive a connection (a stdio server's die with its process).
    tasks: bool,
    /// The version `initialize` offers (a server that speaks no 2026-07-28).
    version: ProtocolVersion,
    /// Who answers sampling (declared as a capability when the caller).
    sampling: Sampling,
    /// The roots given to the server (declared when there are any).
    roots: Arc<[RootConfig]>,
    /// Counts `notifications/tools/list_changed` (the tool-list follower).
    tools_changed: Option<watch::Sender<u64>>,
}

impl CallClient {
    /// A client for listing tools: it asks nothing and reports nothing.
    pub(crate) fn quiet() -> Self {
        Self {
            events: None,
            tasks: false,
            version: ProtocolVersion::V_2026_07_28,
            sampling: Sampling::Refuse,
            roots: Arc::new([]),
            tools_changed: None,
        }
    }

    /// A client for following the tool list: like [`Self::quiet`], and it
    /// counts each `notifications/tools/list_changed` into `changed`.
    pub(crate) fn watching(changed: watch::Sender<u64>) -> Self {
        Self {
            tools_changed: Some(changed),
            ..Self::quiet()
        }
    }

    /// A client that reports the call's events to `events`.
    pub(crate) fn reporting(events: mpsc::Sender<CallEvent>) -> Self {
        Self {
            events: Some(events),
            tasks: false,
            version: ProtocolVersion::V_2026_07_28,
            sampling: Sampling::Refuse,
            roots: Arc::new([]),
            tools_changed: None,
        }
    }
}

/// Form and URL elicitation, which agentgate turns into `input_required`;
/// the tasks extension when `tasks`; sampling and roots only where the
/// operator's settings serve them.
fn client_config(client: &CallClient) -> ClientConfig {
    let elicitation = ElicitationCapability::new()
        .with_form(FormElicitationCapability::new())
        .with_url(UrlElicitationCapability::new());
    let builder = ClientCapabilities::builder().enable_elicitation_with(elicitation);
    let mut caps = if client.tasks {
        builder.enable_tasks().build()
    } else {
        builder.build()
    };
    if client.sampling == Sampling::Caller {
        caps.sampling = Some(SamplingCapability::default());
    }
    if !client.roots.is_empty() {
        caps.roots = Some(RootsCapabilities::default());
    }
    ClientConfig::new(
        caps,
        Implementation::new("agentgate", env!("CARGO_PKG_VERSION")),
    )
    .with_protocol_version(client.version.clone())
}

impl ClientHandler for CallClient {
    fn get_info(&self) -> ClientConfig {
        client_config(self)
    }

    async fn on_tool_list_changed(&self, _: NotificationContext<RoleClient>) {
        if let Some(changed) = &self.tools_changed {
            changed.send_modify(|count| *count += 1);
        }
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _: NotificationContext<RoleClient>,
    ) {
        let Some(events) = &self.events else {
            return;
        };
        let mut status = match params.total {
            Some(total) => format!("progress {}/{}", params.progress, total),
            None => format!("progress {}", params.progress),
        };
        if let Some(message) = params.message.filter(|m| !m.trim().is_empty()) {
            status.push_str(": ");
            status.push_str(&capped(&message));
        }
        // A full queue drops a progress report, never the call: the next
        // one says as much.
        let _ = events.try_send(CallEvent::Progress(status));
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let Some(events) = &self.events else {
            return Err(ErrorData::invalid_request(
                "agentgate asks nothing while it lists tools",
                None,
            ));
        };
        let (answer, answered) = oneshot::channel();
        events
            .send(CallEvent::Ask(request, answer))
            .await
            .map_err(|_| ErrorData::internal_error("the call ended before it asked", None))?;
        answered.await.map_err(|_| {
            ErrorData::internal_error(
                "agentgate stopped following the call before the question was answered",
                None,
            )
        })
    }

    #[allow(deprecated)]
    async fn create_message(
        &self,
        request: CreateMessageRequestParams,
        _: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        if self.sampling == Sampling::Refuse {
            return Err(ErrorData::new(
                ErrorCode::METHOD_NOT_FOUND,
                "agentgate does not serve sampling to this server: it has no model of its \
                 own, and the operator has not set `sampling = \"caller\"` for it",
                None,
            ));
        }
        let Some(events) = &self.events else {
            return Err(ErrorData::invalid_request(
                "sampling is served during a tool call only: nobody is asked while agentgate \
                 lists tools",
                None,
            ));
        };
        let (answer, answered) = oneshot::channel();
        events
            .send(CallEvent::Sample(for_the_caller(request), answer))
            .await
            .map_err(|_| ErrorData::internal_error("the call ended before it asked", None))?;
        match answered.await {
            Ok(Some(result)) => Ok(result),
            Ok(None) => Err(ErrorData::internal_error(
                "the caller gave no completion for this sampling request",
                None,
            )),
            Err(_) => Err(ErrorData::internal_error(
                "agentgate stopped following the call before the caller answered",
                None,
            )),
        }
    }

    #[allow(deprecated)]
    async fn list_roots(
        &self,
        _: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        if self.roots.is_empty() {
            return Err(ErrorData::new(
                ErrorCode::METHOD_NOT_FOUND,
                "agentgate shares no roots with this server: the operator set no `roots` for it",
                None,
            ));
        }
        Ok(ListRootsResult::new(
            self.roots
                .iter()
                .map(|root| {
                    let shown = Root::new(root.uri.clone());
                    match &root.name {
                        Some(name) => shown.with_name(name.clone()),
                        None => shown,
                    }
                })
                .collect(),
        ))
    }
}

/// A connected call client. [`Connection::close`] ends it, and a stdio
/// server's whole process group with it (a wrapper such as `npx` or
/// `sh -c` leaves the real server a grandchild, which closing stdin does
/// not always stop); so does dropping it unclosed (a follower stopped at
/// shutdown, say), without the goodbye.
pub(crate) struct Connection {
    service: RunningService<RoleClient, CallClient>,
    group: ProcessGroup,
    /// An HTTP connection's session.
    session: Option<Arc<SessionHandle>>,
}

impl Connection {
    pub(crate) fn peer(&self) -> &Peer<RoleClient> {
        self.service.peer()
    }

    /// An HTTP connection's session (none over stdio).
    pub(crate) fn session(&self) -> Option<&Arc<SessionHandle>> {
        self.session.as_ref()
    }

    pub(crate) async fn close(self) {
        let Connection { service, group, .. } = self;
        let _ = service.cancel().await;
        drop(group);
    }
}

/// A stdio server's process group, killed when dropped.
struct ProcessGroup(Option<u32>);

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        kill_group(self.0.take());
    }
}

/// Kills what is left of a stdio server's process group.
fn kill_group(group: Option<u32>) {
    #[cfg(unix)]
    if let Some(pid) = group.and_then(|pid| i32::try_from(pid).ok()) {
        use nix::sys::signal::{Signal, killpg};
        // ESRCH (the group is gone already) is the usual answer.
        let _ = killpg(nix::unistd::Pid::from_raw(pid), Signal::SIGKILL);
    }
    #[cfg(not(unix))]
    let _ = group;
}

/// How to reach one server, and the count of what was asked of it
/// (`agentgate_upstream_calls_total{backend="mcp"}`, by MCP method).
#[derive(Debug)]
pub(crate) struct Upstream {
    pub(crate) settings: ServerSettings,
    pub(crate) metrics: UpstreamMetrics,
    /// The version before 2026-07-28 this server turned out to speak, once
    /// a connection fell back to `initialize`: later ones start that way.
    pub(crate) legacy: Mutex<Option<ProtocolVersion>>,
    /// The tools this 2025-11-25 server runs only as tasks (it refused a
    /// plain call of each): called as tasks from then on.
    pub(crate) task_only: Mutex<std::collections::HashSet<String>>,
}

impl Upstream {
    /// How to reach the server `settings` names, counting into `metrics`.
    pub(crate) fn new(settings: ServerSettings, metrics: UpstreamMetrics) -> Self {
        Self {
            settings,
            metrics,
            legacy: Mutex::default(),
            task_only: Mutex::default(),
        }
    }

    /// Starts (stdio) or opens (HTTP) a connection with `client` at its end,
    /// within the server's connect timeout. The error says what failed in
    /// the operator's terms, with the end of a stdio server's stderr.
    /// `owner` is the principal the connection speaks for: its own token
    /// is sent when the server has one for it (`principal_tokens`), else the
    /// server's; a stdio server gets its own variables (`principal_env`).
    pub(crate) async fn connect(
        &self,
        client: CallClient,
        owner: Option<&Owner>,
    ) -> Result<Connection, ConnectError> {
        self.connect_in(client, owner, None).await
    }

    /// [`Self::connect`], into the saved 2025-11-25 session `enter` when
    /// given (HTTP servers): no handshake reaches the server, whose session
    /// it is already ([`crate::session`]).
    pub(crate) async fn connect_in(
        &self,
        mut client: CallClient,
        owner: Option<&Owner>,
        enter: Option<SavedSession>,
    ) -> Result<Connection, ConnectError> {
        client.tasks = matches!(self.settings.transport, Transport::Http { .. });
        client.sampling = self.settings.sampling;
        client.roots = self.settings.roots.clone().into();
        let timeout = self.settings.connect_timeout;
        let stderr: Arc<Mutex<VecDeque<String>>> = Arc::default();
        let group: Mutex<Option<u32>> = Mutex::default();
        let reader: Mutex<Option<tokio::task::JoinHandle<()>>> = Mutex::default();
        let session: Mutex<Option<Arc<SessionHandle>>> = Mutex::default();
        let connecting = async {
            let known_legacy = match &enter {
                Some(_) => Some(ProtocolVersion::V_2025_11_25),
                None => lock(&self.legacy).clone(),
            };
            let mode = match known_legacy {
                Some(version) => {
                    client.version = version;
                    ClientLifecycleMode::Initialize
                }
                None => lifecycle(),
            };
            // The OAuth token this start sends (from the cache, or fetched).
            let oauth = self.oauth_for(owner);
            let sent = match oauth {
                Some(oauth) => oauth.token(&self.metrics).await.ok(),
                None => None,
            };
            let opened = Opened {
                group: &group,
                reader: &reader,
                stderr: &stderr,
                session: &session,
            };
            let mut first = self
                .start(client.clone(), owner, mode.clone(), enter.clone(), &opened)
                .await;
            if let (Some(oauth), Some(sent), Err(Started::Init(error))) = (oauth, &sent, &first)
                && matches!(**error, ClientInitializeError::TransportError { .. })
            {
                // A handshake that failed at the HTTP level may be a token
                // revoked or run out early, said with a bare 401 that rmcp
                // does not tell apart: it is not used again (a newer one a
                // neighbour fetched is kept).
                oauth.client.rejected(|token| token == sent).await;
                // A 401 with a challenge certainly is: once more, with a new one.
                if unauthorized(error) {
                    kill_group(lock(&group).take());
                    lock(&stderr).clear();
                    first = self.start(client.clone(), owner, mode, None, &opened).await;
                }
            }
            // A server that answers `server/discover` with only versions
            // before 2026-07-28 speaks them through `initialize`, which rmcp's
            // automatic mode does not fall back to: start it again that way.
            let legacy = match &first {
                Err(Started::Init(error)) => match &**error {
                    ClientInitializeError::NoCompatibleProtocolVersion {
                        server_supported, ..
                    } => legacy_version(server_supported),
                    _ => None,
                },
                _ => None,
            };
            match (first, legacy) {
                (Ok(service), _) => Ok(service),
                (Err(_), Some(version)) => {
                    kill_group(lock(&group).take());
                    lock(&stderr).clear();
                    *lock(&self.legacy) = Some(version.clone());
                    client.version = version;
                    let mode = ClientLifecycleMode::Initialize;
                    self.start(client, owner, mode, None, &opened)
                        .await
                        .map_err(Started::describe)
                }
                (Err(error), None) => Err(error.describe()),
            }
        };
        let what = match &self.settings.transport {
            Transport::Stdio { command, .. } => format!("stdio server `{command}`"),
            Transport::Http { url, .. } => format!("server at {url}"),
        };
        let outcome = tokio::time::timeout(timeout, connecting).await;
        let group = lock(&group).take();
        let error = match outcome {
            Ok(Ok(service)) => {
                return Ok(Connection {
                    service,
                    group: ProcessGroup(group),
                    session: lock(&session).take(),
                });
            }
            Ok(Err(error)) => error,
            Err(_) => format!("it did not finish connecting within {}s", timeout.as_secs()),
        };
        kill_group(group);
        self.metrics.record("connect", UpstreamOutcome::Transport);
        // Let the stderr reader collect the server's last words: it ends
        // when the (now killed) process's stderr closes.
        let reader = lock(&reader).take();
        if let Some(reader) = reader {
            let _ = tokio::time::timeout(Duration::from_secs(1), reader).await;
        }
        Err(ConnectError {
            message: format!(
                "MCP server \"{}\" ({what}) could not be reached: {error}",
                self.settings.name
            ),
            stderr: tail_text(&stderr),
        })
    }

    /// The OAuth client `owner`'s connections authenticate with, if any
    /// (a principal with a token of its own uses that).
    fn oauth_for(&self, owner: Option<&Owner>) -> Option<&UpstreamOAuth> {
        match &self.settings.transport {
            Transport::Http {
                principal_tokens,
                oauth: Some(oauth),
                ..
            } if owner.is_none_or(|owner| !principal_tokens.contains_key(owner.as_str())) => {
                Some(oauth)
            }
            _ => None,
        }
    }

    /// One start of the server's connection, in lifecycle `mode` (into
    /// the saved session `enter`, over HTTP); what it opened goes to
    /// `opened`.
    async fn start(
        &self,
        client: CallClient,
        owner: Option<&Owner>,
        mode: ClientLifecycleMode,
        enter: Option<SavedSession>,
        opened: &Opened<'_>,
    ) -> Result<RunningService<RoleClient, CallClient>, Started> {
        let Opened {
            group,
            reader,
            stderr,
            session,
        } = *opened;
        match &self.settings.transport {
            Transport::Stdio {
                command,
                args,
                env,
                principal_env,
                cwd,
            } => {
                let mut cmd = tokio::process::Command::new(command);
                cmd.args(args).env_clear().envs(env).kill_on_drop(true);
                // The principal's own values, over the shared ones:
                // each call has its own process, so no other sees them.
                if let Some(own) = owner.and_then(|owner| principal_env.get(owner.as_str())) {
                    cmd.envs(own.iter().map(|(var, value)| (var, value.expose())));
                }
                if let Some(cwd) = cwd {
                    cmd.current_dir(cwd);
                }
                // Its own process group: a Ctrl-C meant for agentgate does
                // not kill calls it is about to cancel cleanly.
                #[cfg(unix)]
                cmd.process_group(0);
                let (transport, err) = TokioChildProcess::builder(cmd)
                    .stderr(Stdio::piped())
                    .spawn()
                    .map_err(|e| Started::Spawn(format!("cannot start `{command}`: {e}")))?;
                *lock(group) = transport.id();
                if let Some(err) = err {
                    *lock(reader) = Some(keep_tail(err, stderr.clone()));
                }
                client
                    .serve_with_lifecycle(transport, mode)
                    .await
                    .map_err(|e| Started::Init(Box::new(e)))
            }
            Transport::Http {
                url,
                token,
                principal_tokens,
                oauth,
            } => {
                let mut config = StreamableHttpClientTransportConfig::with_uri(url.clone());
                let own = owner.and_then(|owner| principal_tokens.get(owner.as_str()));
                let header = match (own, oauth) {
                    (Some(own), _) => Some(own.expose().to_owned()),
                    (None, Some(oauth)) => Some(
                        oauth
                            .token(&self.metrics)
                            .await
                            .map_err(|e| Started::Spawn(e.to_string()))?
                            .expose()
                            .to_owned(),
                    ),
                    (None, None) => token.as_ref().map(|token| token.expose().to_owned()),
                };
                if let Some(header) = header {
                    config = config.auth_header(header);
                }
                // A session the server forgot is the end of what lived in it:
                // a new one (rmcp's default) would hide that.
                config = config.reinit_on_expired_session(false);
                let http = SessionClient::new(enter)
                    .map_err(|e| Started::Spawn(format!("cannot make an HTTP client: {e}")))?;
                *lock(session) = Some(http.handle());
                let transport = StreamableHttpClientTransport::with_client(http, config);
                client
                    .serve_with_lifecycle(transport, mode)
                    .await
                    .map_err(|e| Started::Init(Box::new(e)))
            }
        }
    }
}

/// Why a connection could not be made. What a stdio server wrote on stderr
/// is kept apart: it is for the operator (logs, `agentgate check`), never
/// for a task's caller, since a server may print what it should not.
#[derive(Debug)]
pub(crate) struct ConnectError {
    /// What failed, for anyone.
    pub(crate) message: String,
    /// "; its stderr ended with: …", or empty.
    pub(crate) stderr: String,
}

impl ConnectError {
    /// The message with the server's stderr, for the operator.
    pub(crate) fn for_operator(&self) -> String {
        format!("{}{}", self.message, self.stderr)
    }

    /// The message, after logging the whole of it for the operator.
    pub(crate) fn logged(self, server: &str) -> String {
        tracing::warn!(%server, error = %self.for_operator(), "MCP server unreachable");
        self.message
    }
}

/// Where one start puts what it opened: a stdio server's process group,
/// the reader of its stderr (which keeps the tail), an HTTP connection's
/// session.
struct Opened<'a> {
    group: &'a Mutex<Option<u32>>,
    reader: &'a Mutex<Option<tokio::task::JoinHandle<()>>>,
    stderr: &'a Arc<Mutex<VecDeque<String>>>,
    session: &'a Mutex<Option<Arc<SessionHandle>>>,
}

/// Why one start failed.
enum Started {
    /// The process could not be spawned.
    Spawn(String),
    /// rmcp's handshake failed.
    Init(Box<ClientInitializeError>),
}

impl Started {
    fn describe(self) -> String {
        match self {
            Started::Spawn(why) => why,
            Started::Init(error) => describe(&error),
        }
    }
}

/// A server's sampling request as the caller sees it: the server may not
/// ask for context from the caller's other servers (it would go back to a
/// third party), nor offer tools to the caller's model (agentgate declares
/// no sampling tools), and its `_meta` stays its own.
#[allow(deprecated)]
fn for_the_caller(mut request: CreateMessageRequestParams) -> CreateMessageRequestParams {
    request.include_context = None;
    request.tools = None;
    request.tool_choice = None;
    request.meta = None;
    request
}

/// Whether the server answered 401 during the handshake.
fn unauthorized(error: &ClientInitializeError) -> bool {
    error.is_authorization_required()
}

/// The newest version before 2026-07-28 that both sides speak, if any.
fn legacy_version(server_supported: &[ProtocolVersion]) -> Option<ProtocolVersion> {
    [
        ProtocolVersion::V_2025_11_25,
        ProtocolVersion::V_2025_06_18,
        ProtocolVersion::V_2025_03_26,
    ]
    .into_iter()
    .find(|version| server_supported.contains(version))
}

fn lifecycle() -> ClientLifecycleMode {
    ClientLifecycleMode::Auto {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        legacy_version: Some(ProtocolVersion::V_2025_11_25),
    }
}

/// rmcp's start-up errors, told without its `Debug` dumps.
fn describe(error: &ClientInitializeError) -> String {
    match error {
        ClientInitializeError::ConnectionClosed(_) => {
            "it closed the connection during the handshake (did it start? is it an MCP server?)"
                .to_owned()
        }
        ClientInitializeError::JsonRpcError(e) => {
            format!("it refused the handshake: {}", e.message)
        }
        // rmcp's text for these names the transport's Rust type; what
        // failed beneath it (the HTTP client's error and its causes) is
        // what the operator can act on.
        ClientInitializeError::TransportError { error, context } => {
            format!("{context}: {}", causes(&*error.error))
        }
        other => {
            // Display of the remaining kinds may name transport types; keep
            // the first line, which says what happened.
            let text = other.to_string();
            text.lines()
                .next()
                .unwrap_or("the handshake failed")
                .to_owned()
        }
    }
}

/// An error and its sources, each said once, as "a: b: c" (an HTTP
/// client's error says little without its causes: "error sending
/// request …: client error (Connect): tcp connect error: Connection
/// refused"), cut like a status message.
pub(crate) fn causes(error: &(dyn std::error::Error + 'static)) -> String {
    let mut said: Vec<String> = Vec::new();
    let mut next = Some(error);
    while let Some(error) = next {
        let text = error.to_string();
        if !said.iter().any(|earlier| earlier.contains(&text)) {
            said.push(text);
        }
        next = error.source().or_else(|| client_error(error));
    }
    capped(&said.join(": "))
}

/// The HTTP client's error inside rmcp's, which rmcp does not give as its
/// source.
fn client_error<'a>(
    error: &'a (dyn std::error::Error + 'static),
) -> Option<&'a (dyn std::error::Error + 'static)> {
    use rmcp::transport::streamable_http_client::StreamableHttpError;
    match error.downcast_ref::<StreamableHttpError<rmcp_reqwest::Error>>()? {
        StreamableHttpError::Client(inner) => Some(inner),
        _ => None,
    }
}

/// Reads a stdio server's stderr to its end (so the server never blocks on
/// a full pipe), keeping the last lines, each cut to [`LINE_CAP`]
/// characters, for error messages; bytes that are not UTF-8 are replaced.
fn keep_tail(
    mut stderr: tokio::process::ChildStderr,
    tail: Arc<Mutex<VecDeque<String>>>,
) -> tokio::task::JoinHandle<()> {
    use tokio::io::AsyncReadExt as _;
    tokio::spawn(async move {
        let mut line: Vec<u8> = Vec::new();
        let mut chunk = [0u8; 4096];
        let keep = |line: &mut Vec<u8>| {
            let text = String::from_utf8_lossy(line).into_owned();
            line.clear();
            tracing::debug!(target: "agentgate::mcp_upstream_stderr", "{text}");
            let mut tail = lock(&tail);
            if tail.len() == STDERR_TAIL {
                tail.pop_front();
            }
            tail.push_back(capped(&text));
        };
        loop {
            let n = match stderr.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            for &byte in &chunk[..n] {
                if byte == b'\n' {
                    keep(&mut line);
                } else if line.len() < LINE_CAP * 4 {
                    line.push(byte);
                }
            }
        }
        if !line.is_empty() {
            keep(&mut line);
        }
    })
}

/// The longest line of a server's text (a progress message, a stderr line)
/// that agentgate keeps, in characters.
const LINE_CAP: usize = 1000;

/// `text` cut to [`LINE_CAP`] characters, the last one an ellipsis.
pub(crate) fn capped(text: &str) -> String {
    if text.chars().count() <= LINE_CAP {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(LINE_CAP - 1).collect();
    cut.push('…');
    cut
}

/// A lock that a panicking holder does not poison for everyone else.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn tail_text(tail: &Mutex<VecDeque<String>>) -> String {
    let tail = lock(tail);
    if tail.is_empty() {
        return String::new();
    }
    let lines: Vec<&str> = tail.iter().map(String::as_str).collect();
    format!("; its stderr ended with:\n{}", lines.join("\n"))
}

/// What to ask of a task a server holds.
#[derive(Debug)]
pub(crate) enum TaskAction {
    Get,
    Update(rmcp::model::InputResponses),
    Cancel,
}

/// What the server said of its task, or why it could not be asked.
#[derive(Debug)]
pub(crate) enum TaskRead {
    /// `tasks/get`'s answer.
    Got(rmcp::model::GetTaskResult),
    /// `tasks/update` or `tasks/cancel` was accepted.
    Done,
    /// The server answered with a JSON-RPC error (an unknown task, say).
    Refused(ErrorData),
    /// The server could not be reached or the connection broke: try again.
    Unreachable(String),
}

impl Upstream {
    /// One request about a task the server holds, on a short connection.
    pub(crate) async fn task_request(
        &self,
        id: &str,
        action: TaskAction,
        owner: &Owner,
    ) -> TaskRead {
        use rmcp::model::{CancelTaskParams, GetTaskParams, UpdateTaskParams};
        use rmcp::service::ServiceError;
        let connection = match self.connect(CallClient::quiet(), Some(owner)).await {
            Ok(connection) => connection,
            Err(why) => return TaskRead::Unreachable(why.logged(&self.settings.name)),
        };
        let peer = connection.peer().clone();
        let operation = match &action {
            TaskAction::Get => "tasks/get",
            TaskAction::Update(_) => "tasks/update",
            TaskAction::Cancel => "tasks/cancel",
        };
        let request = async move {
            match action {
                TaskAction::Get => peer
                    .get_task(GetTaskParams::new(id.to_owned()))
                    .await
                    .map(Some),
                TaskAction::Update(answers) => peer
                    .update_task(UpdateTaskParams::new(id.to_owned(), answers))
                    .await
                    .map(|()| None),
                TaskAction::Cancel => peer
                    .cancel_task(CancelTaskParams::new(id.to_owned()))
                    .await
                    .map(|()| None),
            }
        };
        let read = tokio::time::timeout(self.settings.connect_timeout, request).await;
        connection.close().await;
        self.metrics.record(operation, outcome_of(&read));
        match read {
            Ok(Ok(Some(got))) => TaskRead::Got(got),
            Ok(Ok(None)) => TaskRead::Done,
            Ok(Err(ServiceError::McpError(error))) => TaskRead::Refused(error),
            Ok(Err(other)) => TaskRead::Unreachable(format!(
                "MCP server \"{}\": {}",
                self.settings.name,
                other
                    .to_string()
                    .lines()
                    .next()
                    .unwrap_or("the request failed")
            )),
            Err(_) => TaskRead::Unreachable(format!(
                "MCP server \"{}\" did not answer within {}s",
                self.settings.name,
                self.settings.connect_timeout.as_secs()
            )),
        }
    }
}

/// The `outcome` of a request that may have timed out (`Err`), failed on
/// the way (`Ok(Err(_))` other than a JSON-RPC error) or been answered.
pub(crate) fn outcome_of<T>(
    read: &Result<Result<T, rmcp::service::ServiceError>, tokio::time::error::Elapsed>,
) -> UpstreamOutcome {
    match read {
        Ok(Ok(_)) => UpstreamOutcome::Ok,
        Ok(Err(rmcp::service::ServiceError::McpError(_))) => UpstreamOutcome::ClientError,
        Ok(Err(_)) | Err(_) => UpstreamOutcome::Transport,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::McpConfig;

    #[tokio::test]
    async fn an_unreachable_http_server_is_told_in_the_operators_terms() {
        // A port nothing listens on (bound, then freed).
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .expect("a free port")
            .port();
        let config: McpConfig = agentgate_backend::parse_section(
            "mcp",
            Some(serde_json::json!({"servers": [{
                "name": "s", "url": format!("http://127.0.0.1:{port}/mcp")
            }]})),
        )
        .expect("parses");
        let settings = config.resolve(&|_| None).expect("resolves").remove(0);
        let upstream = Upstream::new(settings, UpstreamMetrics::detached("mcp"));
        let Err(error) = upstream.connect(CallClient::quiet(), None).await else {
            panic!("nothing listens at port {port}")
        };
        let message = error.for_operator();
        assert!(
            message.starts_with(&format!(
                "MCP server \"s\" (server at http://127.0.0.1:{port}/mcp) could not be reached: "
            )),
            "{message}"
        );
        assert!(
            message.contains("Connection refused"),
            "the cause beneath the HTTP client's error: {message}"
        );
        assert!(
            !message.contains("rmcp::") && !message.contains("Worker"),
            "no Rust type names: {message}"
        );
    }
}
