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
//!        ─ sampling, roots        ─▶ refused: agentgate has no model or roots to give
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
use rmcp::model::{CreateMessageRequestParams, CreateMessageResult, ListRootsResult};
use rmcp::service::{
    ClientInitializeError, ClientLifecycleMode, ClientServiceExt as _, NotificationContext,
    RequestContext, RunningService,
};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, ErrorData, RoleClient};
use tokio::io::AsyncBufReadExt as _;
use tokio::sync::{mpsc, oneshot};

use agentgate_backend::{UpstreamMetrics, UpstreamOutcome};

use crate::config::{ServerSettings, Transport};

/// Lines of a stdio server's stderr kept to explain why it stopped.
const STDERR_TAIL: usize = 10;

/// What the server sent during a call, for the step following it.
#[derive(Debug)]
pub(crate) enum CallEvent {
    /// `notifications/progress`, as a status message.
    Progress(String),
    /// `elicitation/create`: the question, and where its answer goes.
    Ask(ElicitRequestParams, oneshot::Sender<ElicitResult>),
}

/// The client end of one call's connection.
#[derive(Clone)]
pub(crate) struct CallClient {
    events: Option<mpsc::Sender<CallEvent>>,
    /// Declares the tasks extension: set for HTTP servers, whose tasks
    /// outlive a connection (a stdio server's die with its process).
    tasks: bool,
}

impl CallClient {
    /// A client for listing tools: it asks nothing and reports nothing.
    pub(crate) fn quiet() -> Self {
        Self {
            events: None,
            tasks: false,
        }
    }

    /// A client that reports the call's events to `events`.
    pub(crate) fn reporting(events: mpsc::Sender<CallEvent>) -> Self {
        Self {
            events: Some(events),
            tasks: false,
        }
    }
}

/// Form and URL elicitation, which agentgate turns into `input_required`;
/// the tasks extension when `tasks`; no sampling and no roots, which it
/// cannot serve.
fn client_config(tasks: bool) -> ClientConfig {
    let elicitation = ElicitationCapability::new()
        .with_form(FormElicitationCapability::new())
        .with_url(UrlElicitationCapability::new());
    let builder = ClientCapabilities::builder().enable_elicitation_with(elicitation);
    let caps = if tasks {
        builder.enable_tasks().build()
    } else {
        builder.build()
    };
    ClientConfig::new(
        caps,
        Implementation::new("agentgate", env!("CARGO_PKG_VERSION")),
    )
    .with_protocol_version(ProtocolVersion::V_2026_07_28)
}

impl ClientHandler for CallClient {
    fn get_info(&self) -> ClientConfig {
        client_config(self.tasks)
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
            status.push_str(&message);
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
        _: CreateMessageRequestParams,
        _: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        Err(ErrorData::new(
            ErrorCode::METHOD_NOT_FOUND,
            "agentgate does not serve sampling to upstream servers: it has no model of its own",
            None,
        ))
    }

    #[allow(deprecated)]
    async fn list_roots(
        &self,
        _: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        Err(ErrorData::new(
            ErrorCode::METHOD_NOT_FOUND,
            "agentgate shares no roots with upstream servers",
            None,
        ))
    }
}

/// A connected call client; dropping it closes the connection (and ends a
/// stdio server's process).
pub(crate) type Connection = RunningService<RoleClient, CallClient>;

/// How to reach one server, and the count of what was asked of it
/// (`agentgate_upstream_calls_total{backend="mcp"}`, by MCP method).
#[derive(Debug)]
pub(crate) struct Upstream {
    pub(crate) settings: ServerSettings,
    pub(crate) metrics: UpstreamMetrics,
}

impl Upstream {
    /// Starts (stdio) or opens (HTTP) a connection with `client` at its end,
    /// within the server's connect timeout. The error says what failed in
    /// the operator's terms, with the end of a stdio server's stderr.
    pub(crate) async fn connect(&self, mut client: CallClient) -> Result<Connection, ConnectError> {
        client.tasks = matches!(self.settings.transport, Transport::Http { .. });
        let timeout = self.settings.connect_timeout;
        let stderr: Arc<Mutex<VecDeque<String>>> = Arc::default();
        let connecting = async {
            match &self.settings.transport {
                Transport::Stdio {
                    command,
                    args,
                    env,
                    cwd,
                } => {
                    let mut cmd = tokio::process::Command::new(command);
                    cmd.args(args).env_clear().envs(env).kill_on_drop(true);
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
                        .map_err(|e| format!("cannot start `{command}`: {e}"))?;
                    if let Some(err) = err {
                        keep_tail(err, stderr.clone());
                    }
                    client
                        .serve_with_lifecycle(transport, lifecycle())
                        .await
                        .map_err(|e| describe(&e))
                }
                Transport::Http { url, token } => {
                    let mut config = StreamableHttpClientTransportConfig::with_uri(url.clone());
                    if let Some(token) = token {
                        config = config.auth_header(token.expose().to_owned());
                    }
                    let transport = StreamableHttpClientTransport::from_config(config);
                    client
                        .serve_with_lifecycle(transport, lifecycle())
                        .await
                        .map_err(|e| describe(&e))
                }
            }
        };
        let what = match &self.settings.transport {
            Transport::Stdio { command, .. } => format!("stdio server `{command}`"),
            Transport::Http { url, .. } => format!("server at {url}"),
        };
        let outcome = tokio::time::timeout(timeout, connecting).await;
        let error = match outcome {
            Ok(Ok(connection)) => return Ok(connection),
            Ok(Err(error)) => error,
            Err(_) => format!("it did not finish connecting within {}s", timeout.as_secs()),
        };
        self.metrics.record("connect", UpstreamOutcome::Transport);
        // The stderr reader may still be collecting the server's last words.
        tokio::time::sleep(Duration::from_millis(100)).await;
        Err(ConnectError {
            message: format!(
                "MCP server \"{}\" ({what}) could not be reached: {error}",
                self.settings.name
            ),
            stderr: tail_text(&stderr),
        })
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

fn keep_tail(stderr: tokio::process::ChildStderr, tail: Arc<Mutex<VecDeque<String>>>) {
    tokio::spawn(async move {
        let mut lines = tokio::io::BufReader::new(stderr).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            tracing::debug!(target: "agentgate::mcp_upstream_stderr", "{line}");
            let mut tail = tail.lock().unwrap_or_else(PoisonError::into_inner);
            if tail.len() == STDERR_TAIL {
                tail.pop_front();
            }
            tail.push_back(line.chars().take(500).collect());
        }
    });
}

fn tail_text(tail: &Mutex<VecDeque<String>>) -> String {
    let tail = tail.lock().unwrap_or_else(PoisonError::into_inner);
    if tail.is_empty() {
        return String::new();
    }
    let lines: Vec<&str> = tail.iter().map(String::as_str).collect();
    format!("; its stderr ended with:\n{}", lines.join("\n"))
}

/// What `tasks/get` said of an upstream task, or why it could not be read.
#[derive(Debug)]
pub(crate) enum TaskRead {
    Got(rmcp::model::GetTaskResult),
    /// The server answered with a JSON-RPC error (an unknown task, say).
    Refused(ErrorData),
    /// The server could not be reached or the connection broke: try again.
    Unreachable(String),
}

impl Upstream {
    /// One short connection for following a task the server holds:
    /// `answers` first (`tasks/update`), then `tasks/get`, or only
    /// `tasks/cancel` when `cancel`.
    pub(crate) async fn task_request(
        &self,
        id: &str,
        answers: Option<rmcp::model::InputResponses>,
        cancel: bool,
    ) -> TaskRead {
        use rmcp::model::{CancelTaskParams, GetTaskParams, UpdateTaskParams};
        use rmcp::service::ServiceError;
        let connection = match self.connect(CallClient::quiet()).await {
            Ok(connection) => connection,
            Err(why) => return TaskRead::Unreachable(why.logged(&self.settings.name)),
        };
        let peer = connection.peer().clone();
        let answers_sent = answers.is_some();
        let request = async move {
            if cancel {
                peer.cancel_task(CancelTaskParams::new(id.to_owned()))
                    .await?;
            } else if let Some(answers) = answers {
                peer.update_task(UpdateTaskParams::new(id.to_owned(), answers))
                    .await?;
            }
            peer.get_task(GetTaskParams::new(id.to_owned())).await
        };
        let read = tokio::time::timeout(self.settings.connect_timeout, request).await;
        let _ = connection.cancel().await;
        let operation = match (cancel, &answers_sent) {
            (true, _) => "tasks/cancel",
            (false, true) => "tasks/update",
            (false, false) => "tasks/get",
        };
        self.metrics.record(operation, outcome_of(&read));
        match read {
            Ok(Ok(got)) => TaskRead::Got(got),
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
