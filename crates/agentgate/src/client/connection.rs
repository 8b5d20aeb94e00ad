//! One connection to an MCP server, the requests the client makes on it, and
//! following a task to its end.
//!
//! Every request carries protocol 2026-07-28 `_meta` declaring the tasks
//! extension and form + URL elicitation (rmcp adds it; the server may not
//! infer capabilities from earlier requests). A server that only speaks the
//! older `initialize` lifecycle is still reached: it answers synchronously.
//!
//! Failures are told in a person's terms ([`ConnectionError`]): what went
//! wrong at which URL, then what usually fixes it. rmcp's errors are
//! classified by their parts (the HTTP status, the authentication
//! challenge), never shown as they are: their `Display` names transport
//! types and their fields are `Debug` dumps.

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context as _, Result, anyhow, bail};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ClientCapabilities,
    ClientConfig, DetailedTask, ElicitationCapability, FormElicitationCapability, GetTaskParams,
    Implementation, InputRequests, JsonObject, ProtocolVersion, Task, TaskPayload,
    UpdateTaskParams, UrlElicitationCapability,
};
use rmcp::service::{
    ClientInitializeError, ClientLifecycleMode, ClientServiceExt as _, RunningService, ServiceError,
};
use rmcp::transport::streamable_http_client::{
    AuthRequiredError, InsufficientScopeError, StreamableHttpClientTransportConfig,
};
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ErrorData, RoleClient};
use serde::{Deserialize, Serialize};
use tokio::io::AsyncBufReadExt as _;

use super::input::InputSource;
use super::render::FollowObserver;

/// Where a server is: enough to reconnect later, so it is stored with each
/// task in the local task list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Server {
    /// A Streamable HTTP endpoint, e.g. `http://127.0.0.1:8722/mcp`.
    Http { url: String },
    /// A command that serves MCP on its stdin/stdout, split like a shell
    /// would, run in `dir` (so relative paths in it keep their meaning).
    Stdio {
        command: String,
        dir: Option<PathBuf>,
    },
}

impl Server {
    /// A stdio server run from the current directory.
    pub(crate) fn stdio(command: impl Into<String>) -> Self {
        Self::Stdio {
            command: command.into(),
            dir: std::env::current_dir().ok(),
        }
    }
}

impl std::fmt::Display for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Http { url } => f.write_str(url),
            Self::Stdio { command, .. } => write!(f, "stdio: {command}"),
        }
    }
}

/// What `tools/call` gave back.
#[derive(Debug, Clone)]
pub(crate) enum CallOutcome {
    /// The server answered synchronously.
    Done(CallToolResult),
    /// The server started a task: follow it with [`Connection::follow`].
    Task(Task),
}

/// How a task ended.
#[derive(Debug, Clone)]
pub(crate) enum FinalState {
    /// The tool ran; its result may still be a tool error (`isError`).
    Completed {
        task: Task,
        result: CallToolResult,
    },
    /// A protocol-level failure: the JSON-RPC error the task ended with.
    Failed {
        task: Task,
        error: JsonObject,
    },
    Cancelled {
        task: Task,
    },
}

impl FinalState {
    pub(crate) fn task(&self) -> &Task {
        match self {
            Self::Completed { task, .. } | Self::Failed { task, .. } | Self::Cancelled { task } => {
                task
            }
        }
    }
}

/// MRTR rounds driven before giving up on a server that keeps asking.
const MAX_INPUT_ROUNDS: usize = 10;
/// When the server suggests no poll interval.
const DEFAULT_POLL: Duration = Duration::from_secs(1);
/// Lines of a stdio server's stderr kept to explain a failed start.
const STDERR_TAIL: usize = 20;

/// A connected MCP client. Dropping it closes the connection (and stops a
/// stdio server it spawned).
#[derive(Debug)]
pub(crate) struct Connection {
    service: RunningService<RoleClient, ClientConfig>,
    server: Server,
    stderr_tail: Arc<Mutex<Vec<String>>>,
}

/// The capabilities sent with every request.
fn client_config() -> ClientConfig {
    let elicitation = ElicitationCapability::new()
        .with_form(FormElicitationCapability::new())
        .with_url(UrlElicitationCapability::new());
    let caps = ClientCapabilities::builder()
        .enable_elicitation_with(elicitation)
        .enable_tasks()
        .build();
    ClientConfig::new(
        caps,
        Implementation::new("agentgate", env!("CARGO_PKG_VERSION")),
    )
    .with_protocol_version(ProtocolVersion::V_2026_07_28)
}

fn lifecycle() -> ClientLifecycleMode {
    // Discover first; a server that only knows `initialize` is still served
    // (synchronously: tasks need 2026-07-28).
    ClientLifecycleMode::Auto {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        legacy_version: Some(ProtocolVersion::V_2025_11_25),
    }
}

impl Connection {
    /// Connects to a Streamable HTTP endpoint, sending the bearer token in
    /// `AGENTGATE_TOKEN` if there is one (an environment variable, not a
    /// flag: command lines are visible to every user of the machine).
    pub(crate) async fn http(url: &str) -> Result<Self> {
        check_scheme(url)?;
        let mut config = StreamableHttpClientTransportConfig::with_uri(url.to_owned());
        let token = std::env::var("AGENTGATE_TOKEN")
            .ok()
            .filter(|token| !token.is_empty());
        let has_token = token.is_some();
        if let Some(token) = token {
            config = config.auth_header(token);
        }
        let transport = StreamableHttpClientTransport::from_config(config);
        let service = match client_config()
            .serve_with_lifecycle(transport, lifecycle())
            .await
        {
            Ok(service) => service,
            Err(e) => return Err(classify_http_failure(url, has_token, &e).await.into()),
        };
        Ok(Self {
            service,
            server: Server::Http {
                url: url.to_owned(),
            },
            stderr_tail: Arc::default(),
        })
    }

    /// Spawns `command` (split like a shell would) and speaks MCP over its
    /// stdin/stdout.
    #[allow(dead_code)] // API for `agentgate demo`; the CLI goes through `open`.
    pub(crate) async fn stdio(command: &str) -> Result<Self> {
        Self::open(&Server::stdio(command)).await
    }

    /// Connects to `server`.
    pub(crate) async fn open(server: &Server) -> Result<Self> {
        let (command, dir) = match server {
            Server::Http { url } => return Self::http(url).await,
            Server::Stdio { command, dir } => (command, dir),
        };
        let words = shlex::split(command)
            .with_context(|| format!("--stdio {command:?}: unbalanced quotes"))?;
        let Some((program, args)) = words.split_first() else {
            bail!("--stdio needs a command, e.g. --stdio \"agentgate serve --stdio\"");
        };
        let mut cmd = tokio::process::Command::new(program);
        cmd.args(args);
        if let Some(dir) = dir.as_ref().filter(|d| d.is_dir()) {
            cmd.current_dir(dir);
        }
        // Its own process group: Ctrl-C at the terminal reaches only us, so
        // the server is still there to hear a tasks/cancel.
        #[cfg(unix)]
        cmd.process_group(0);
        let (transport, stderr) = TokioChildProcess::builder(cmd)
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("starting the stdio server `{program}`"))?;
        let stderr_tail: Arc<Mutex<Vec<String>>> = Arc::default();
        if let Some(stderr) = stderr {
            // Keep the server's log quiet but at hand: shown if it fails.
            let tail = stderr_tail.clone();
            tokio::spawn(async move {
                let mut lines = tokio::io::BufReader::new(stderr).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    if let Ok(mut tail) = tail.lock() {
                        if tail.len() == STDERR_TAIL {
                            tail.remove(0);
                        }
                        tail.push(line);
                    }
                }
            });
        }
        let service = match client_config()
            .serve_with_lifecycle(transport, lifecycle())
            .await
        {
            Ok(service) => service,
            Err(e) => {
                // Give the reader a moment to collect what the server said.
                tokio::time::sleep(Duration::from_millis(200)).await;
                let log = tail_text(&stderr_tail);
                bail!(
                    "cannot start the stdio server `{command}`: {}{log}",
                    describe_init_error(&e)
                );
            }
        };
        Ok(Self {
            service,
            server: server.clone(),
            stderr_tail,
        })
    }

    #[allow(dead_code)] // API for `agentgate demo`.
    pub(crate) fn server(&self) -> &Server {
        &self.server
    }

    /// `tools/call`. Input the server asks for before starting (MRTR
    /// `input_required`) is answered by `input` and the call retried.
    pub(crate) async fn call(
        &self,
        tool: &str,
        args: JsonObject,
        input: &mut impl InputSource,
    ) -> Result<CallOutcome> {
        let mut params = CallToolRequestParams::new(tool.to_owned()).with_arguments(args);
        for _ in 0..MAX_INPUT_ROUNDS {
            let response = match self.service.call_tool_once(params.clone()).await {
                Ok(response) => response,
                Err(e) => {
                    return Err(self.explain(e).await)
                        .with_context(|| format!("calling tool `{tool}`"));
                }
            };
            match response {
                CallToolResponse::Complete(result) => return Ok(CallOutcome::Done(result)),
                CallToolResponse::Task(created) => return Ok(CallOutcome::Task(created.task)),
                CallToolResponse::InputRequired(asked) => {
                    let requests = asked.input_requests.unwrap_or_default();
                    let responses = if requests.is_empty() {
                        BTreeMap::new()
                    } else {
                        input.answer(&requests).await?
                    };
                    params.input_responses = Some(responses);
                    params.request_state = asked.request_state;
                }
                other => bail!("`{tool}` answered with an unsupported result: {other:?}"),
            }
        }
        bail!("`{tool}` asked for input {MAX_INPUT_ROUNDS} times without finishing; giving up")
    }

    /// `tasks/get`.
    pub(crate) async fn get(&self, task_id: &str) -> Result<DetailedTask> {
        match self
            .service
            .get_task(GetTaskParams::new(task_id.to_owned()))
            .await
        {
            Ok(got) => Ok(got.task),
            Err(e) => Err(self.explain_task(task_id, e).await),
        }
    }

    /// `tasks/update`: answers to outstanding input requests.
    pub(crate) async fn answer(
        &self,
        task_id: &str,
        responses: rmcp::model::InputResponses,
    ) -> Result<()> {
        match self
            .service
            .update_task(UpdateTaskParams::new(task_id.to_owned(), responses))
            .await
        {
            Ok(()) => Ok(()),
            Err(e) => Err(self.explain_task(task_id, e).await),
        }
    }

    /// `tasks/cancel`. Cooperative: follow the task to see how it ends.
    pub(crate) async fn cancel(&self, task_id: &str) -> Result<()> {
        match self
            .service
            .cancel_task(CancelTaskParams::new(task_id.to_owned()))
            .await
        {
            Ok(()) => Ok(()),
            Err(e) => Err(self.explain_task(task_id, e).await),
        }
    }

    /// Polls `tasks/get` until the task ends, honouring `pollIntervalMs`.
    /// `observer` sees every change of status or status message; new input
    /// requests go to `input` and its answers back with `tasks/update`.
    ///
    /// Cancel-safe between requests: dropping the future (e.g. on Ctrl-C)
    /// leaves the task running on the server.
    pub(crate) async fn follow(
        &self,
        task_id: &str,
        observer: &mut impl FollowObserver,
        input: &mut impl InputSource,
    ) -> Result<FinalState> {
        // Keys answered by this call; the ack of tasks/update is eventually
        // consistent, so they may still be listed for a poll or two.
        let mut answered: HashSet<String> = HashSet::new();
        let mut last: Option<(rmcp::model::TaskStatus, Option<String>)> = None;
        loop {
            let detailed = self.get(task_id).await?;
            let task = detailed.task.clone();
            let now = (task.status, task.status_message.clone());
            if last.as_ref() != Some(&now) {
                observer.status(&task);
                last = Some(now);
            }
            match detailed.payload {
                TaskPayload::Completed { result } => {
                    let result: CallToolResult =
                        serde_json::from_value(serde_json::Value::Object(result))
                            .context("the task's result is not a CallToolResult")?;
                    return Ok(FinalState::Completed { task, result });
                }
                TaskPayload::Failed { error } => return Ok(FinalState::Failed { task, error }),
                TaskPayload::Cancelled => return Ok(FinalState::Cancelled { task }),
                TaskPayload::InputRequired { input_requests } => {
                    let pending: InputRequests = input_requests
                        .into_iter()
                        .filter(|(key, _)| !answered.contains(key))
                        .collect();
                    if !pending.is_empty() {
                        observer.input_needed(&pending);
                        let responses = input.answer(&pending).await?;
                        if responses.is_empty() {
                            bail!("no answer was given to the task's input requests");
                        }
                        answered.extend(responses.keys().cloned());
                        self.answer(task_id, responses).await?;
                        observer.answered();
                        continue;
                    }
                }
                _ => {}
            }
            let wait = task
                .poll_interval_ms
                .map(Duration::from_millis)
                .unwrap_or(DEFAULT_POLL)
                .clamp(Duration::from_millis(10), Duration::from_secs(60));
            tokio::time::sleep(wait).await;
        }
    }

    /// Closes the connection; a spawned stdio server is asked to exit.
    pub(crate) async fn close(self) {
        let _ = self.service.cancel().await;
    }

    async fn explain(&self, e: ServiceError) -> anyhow::Error {
        let log = tail_text(&self.stderr_tail);
        match e {
            ServiceError::McpError(error) => anyhow!(describe_error(&error)),
            ServiceError::TransportClosed => ConnectionError::Lost {
                server: self.server.to_string(),
                detail: format!("the server closed the connection{log}"),
            }
            .into(),
            ServiceError::TransportSend(error) => {
                let status = auth_status(error.error.as_ref());
                match status {
                    Some(status) => ConnectionError::TokenRefused {
                        url: self.server.to_string(),
                        status,
                    }
                    .into(),
                    None => {
                        let said = error.error.to_string();
                        // No HTTP answer: most often the server stopped or
                        // restarted; the network says which.
                        let probed = match &self.server {
                            Server::Http { url } if said.starts_with("Client error") => {
                                probe(url).await
                            }
                            _ => None,
                        };
                        let detail = match probed {
                            Some((reason, hint)) => format!("{reason} — {hint}"),
                            // The transport's own words, without its type name.
                            None => without_client_prefix(&said),
                        };
                        ConnectionError::Lost {
                            server: self.server.to_string(),
                            detail,
                        }
                        .into()
                    }
                }
            }
            other => anyhow!("{other}"),
        }
    }

    async fn explain_task(&self, task_id: &str, e: ServiceError) -> anyhow::Error {
        match e {
            ServiceError::McpError(error)
                if error.code == rmcp::model::ErrorCode::INVALID_PARAMS =>
            {
                ConnectionError::UnknownTask {
                    server: self.server.to_string(),
                    id: task_id.to_owned(),
                    message: error.message.to_string(),
                }
                .into()
            }
            other => self.explain(other).await,
        }
    }
}

/// Why the client could not use a server, worded for the person at the
/// command line: the cause first, then (after ` — `) what usually fixes it.
/// Never holds a token.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConnectionError {
    #[error(
        "cannot connect to {url}: the URL has no scheme — add http:// or https://, e.g. \
         http://{url}"
    )]
    NoScheme { url: String },
    #[error("cannot connect to {url}: {scheme}:// is not supported — use http:// or https://")]
    UnsupportedScheme { url: String, scheme: String },
    #[error("cannot connect to {url}: {reason} — {hint}")]
    Unreachable {
        url: String,
        reason: String,
        hint: &'static str,
    },
    #[error(
        "cannot connect to {url}: the server answered HTTP {status} — the MCP endpoint is \
         usually …/mcp, e.g. {suggested}"
    )]
    WrongPath {
        url: String,
        status: u16,
        suggested: String,
    },
    // The wording `requires authentication (401): set AGENTGATE_TOKEN` is
    // what tests/it/auth.rs looks for.
    #[error(
        "cannot connect to {url}: the server requires authentication ({status}): set \
         AGENTGATE_TOKEN to a token the server accepts"
    )]
    TokenRequired { url: String, status: u16 },
    #[error(
        "cannot connect to {url}: the server refused the token in AGENTGATE_TOKEN ({status}): \
         set AGENTGATE_TOKEN to a token the server accepts"
    )]
    TokenRefused { url: String, status: u16 },
    #[error("cannot connect to {url}: {detail}")]
    Failed { url: String, detail: String },
    #[error("lost the connection to {server}: {detail}")]
    Lost { server: String, detail: String },
    #[error(
        "the server at {server} does not know task {id} (it may have expired after its ttl, or \
         belong to another server): {message}"
    )]
    UnknownTask {
        server: String,
        id: String,
        message: String,
    },
}

impl ConnectionError {
    /// Whether the task is known not to exist on the server, so there is
    /// nothing to resume.
    pub(crate) fn is_unknown_task(&self) -> bool {
        matches!(self, Self::UnknownTask { .. })
    }
}

/// Refuses a URL that reqwest would misread: `127.0.0.1:8722/mcp` does not
/// parse at all and `localhost:8722/mcp` parses as the scheme `localhost`.
fn check_scheme(url: &str) -> Result<(), ConnectionError> {
    let lower = url.to_ascii_lowercase();
    if lower.starts_with("http://") || lower.starts_with("https://") {
        return Ok(());
    }
    match url.split_once("://") {
        Some((scheme, _)) => Err(ConnectionError::UnsupportedScheme {
            url: url.to_owned(),
            scheme: scheme.to_owned(),
        }),
        None => Err(ConnectionError::NoScheme {
            url: url.to_owned(),
        }),
    }
}

/// How long the probe that explains an unreachable server may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// Turns a failed HTTP connect into a [`ConnectionError`].
async fn classify_http_failure(
    url: &str,
    has_token: bool,
    e: &ClientInitializeError,
) -> ConnectionError {
    let url = url.to_owned();
    if let Some(status) = init_auth_status(e) {
        return if has_token {
            ConnectionError::TokenRefused { url, status }
        } else {
            ConnectionError::TokenRequired { url, status }
        };
    }
    if let Some(status) = init_http_status(e) {
        if matches!(status, 401 | 403) {
            // A 401/403 without a challenge: still a credential problem.
            return if has_token {
                ConnectionError::TokenRefused { url, status }
            } else {
                ConnectionError::TokenRequired { url, status }
            };
        }
        if matches!(status, 404 | 405) && !path_of(&url).trim_end_matches('/').ends_with("/mcp") {
            let suggested = suggest_mcp_url(&url);
            return ConnectionError::WrongPath {
                url,
                status,
                suggested,
            };
        }
        return ConnectionError::Failed {
            detail: format!("the server answered HTTP {status} — is this an MCP endpoint?"),
            url,
        };
    }
    // No HTTP answer at all: find out why from the network itself, since
    // rmcp keeps reqwest's cause behind a type this crate cannot name.
    if sent_nothing(e)
        && let Some((reason, hint)) = probe(&url).await
    {
        return ConnectionError::Unreachable { url, reason, hint };
    }
    ConnectionError::Failed {
        detail: describe_init_error(e),
        url,
    }
}

/// The status of a 401 (`AuthRequired`) or 403 (`InsufficientScope`) that
/// came with a `WWW-Authenticate` challenge, in either startup phase.
fn init_auth_status(e: &ClientInitializeError) -> Option<u16> {
    match e {
        ClientInitializeError::TransportError { error, .. } => auth_status(error.error.as_ref()),
        ClientInitializeError::LegacyFallbackFailed { discover, fallback } => {
            init_auth_status(discover).or_else(|| init_auth_status(fallback))
        }
        _ => None,
    }
}

fn auth_status(error: &(dyn std::error::Error + 'static)) -> Option<u16> {
    let mut source = Some(error);
    while let Some(current) = source {
        if current.downcast_ref::<AuthRequiredError>().is_some() {
            return Some(401);
        }
        if current.downcast_ref::<InsufficientScopeError>().is_some() {
            return Some(403);
        }
        source = current.source();
    }
    None
}

/// The HTTP status a startup failure reports, if the server answered at
/// all. rmcp 3.11.0 puts it only in text: `HTTP 404 Not Found: …` in an
/// unexpected response, `server/discover rejected with HTTP 404 …` in a
/// discover rejection.
fn init_http_status(e: &ClientInitializeError) -> Option<u16> {
    match e {
        ClientInitializeError::TransportError { error, .. } => status_in(&error.error.to_string()),
        ClientInitializeError::JsonRpcError(error) => status_in(&error.message),
        // The fallback's answer is the one about the URL itself.
        ClientInitializeError::LegacyFallbackFailed { discover, fallback } => {
            init_http_status(fallback).or_else(|| init_http_status(discover))
        }
        _ => None,
    }
}

/// The number after the first `HTTP ` in `text`, if it is a status code.
fn status_in(text: &str) -> Option<u16> {
    let (_, rest) = text.split_once("HTTP ")?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits
        .parse()
        .ok()
        .filter(|status| (100..600).contains(status))
}

/// Whether startup failed before any HTTP answer (a transport error with no
/// status in it).
fn sent_nothing(e: &ClientInitializeError) -> bool {
    match e {
        ClientInitializeError::TransportError { error, .. } => {
            error.error.to_string().starts_with("Client error")
        }
        ClientInitializeError::LegacyFallbackFailed { discover, fallback } => {
            sent_nothing(discover) || sent_nothing(fallback)
        }
        _ => false,
    }
}

/// Why a TCP connection to the URL's host fails, if it does, and what to
/// check.
async fn probe(url: &str) -> Option<(String, &'static str)> {
    let uri: axum::http::Uri = url.parse().ok()?;
    let host = uri.host()?;
    let port = uri
        .port_u16()
        .unwrap_or(if uri.scheme_str() == Some("https") {
            443
        } else {
            80
        });
    let connect = tokio::net::TcpStream::connect(format!("{host}:{port}"));
    match tokio::time::timeout(PROBE_TIMEOUT, connect).await {
        Ok(Ok(_)) => None,
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => Some((
            "connection refused".to_owned(),
            "is `agentgate serve` running?",
        )),
        // Most often a name that does not resolve.
        Ok(Err(e)) => Some((e.to_string(), "check the host name and port")),
        Err(_) => Some((
            format!("no answer in {}s", PROBE_TIMEOUT.as_secs()),
            "is the host reachable from here (a firewall?)",
        )),
    }
}

fn path_of(url: &str) -> String {
    url.parse::<axum::http::Uri>()
        .map(|uri| uri.path().to_owned())
        .unwrap_or_default()
}

/// `url` with its path replaced by `/mcp`.
fn suggest_mcp_url(url: &str) -> String {
    match url.parse::<axum::http::Uri>() {
        Ok(uri) => match (uri.scheme_str(), uri.authority()) {
            (Some(scheme), Some(authority)) => format!("{scheme}://{authority}/mcp"),
            _ => "http://HOST:PORT/mcp".to_owned(),
        },
        Err(_) => "http://HOST:PORT/mcp".to_owned(),
    }
}

/// A startup failure in words, without rmcp's transport type names or
/// `Debug` dumps of messages.
fn describe_init_error(e: &ClientInitializeError) -> String {
    match e {
        ClientInitializeError::TransportError { error, .. } => {
            without_client_prefix(&error.error.to_string())
        }
        ClientInitializeError::JsonRpcError(error) => describe_error(error),
        ClientInitializeError::LegacyFallbackFailed { fallback, .. } => {
            describe_init_error(fallback)
        }
        ClientInitializeError::ExpectedInitResponse(_)
        | ClientInitializeError::ExpectedInitResult(_) => {
            "the server's answer to initialize is not an MCP initialize result".to_owned()
        }
        ClientInitializeError::NoCompatibleProtocolVersion {
            server_supported, ..
        } => {
            let versions: Vec<String> = server_supported.iter().map(ToString::to_string).collect();
            format!(
                "no protocol version in common (the server speaks {})",
                versions.join(", ")
            )
        }
        ClientInitializeError::ConnectionClosed(_) => {
            "the server closed the connection before answering".to_owned()
        }
        other => other.to_string(),
    }
}

/// reqwest's own words without rmcp's `Client error: ` label.
fn without_client_prefix(text: &str) -> String {
    text.strip_prefix("Client error: ")
        .unwrap_or(text)
        .to_owned()
}

/// A JSON-RPC error as one line: message, code, and the fix for the common ones.
pub(crate) fn describe_error(error: &ErrorData) -> String {
    let hint = match error.code.0 {
        -32021 => " (the server needs a capability this client did not declare)",
        -32022 => " (the server does not speak protocol 2026-07-28)",
        -32601 => " (the server does not implement this method)",
        _ => "",
    };
    format!("{} (JSON-RPC error {}){hint}", error.message, error.code.0)
}

fn tail_text(tail: &Arc<Mutex<Vec<String>>>) -> String {
    let lines = tail.lock().map(|t| t.clone()).unwrap_or_default();
    if lines.is_empty() {
        String::new()
    } else {
        format!("; the server's last log lines:\n  {}", lines.join("\n  "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_status_is_read_from_rmcp_s_words_for_an_http_failure() {
        assert_eq!(
            status_in("unexpected server response: HTTP 404 Not Found: "),
            Some(404)
        );
        assert_eq!(
            status_in("server/discover rejected with HTTP 405 Method Not Allowed: "),
            Some(405)
        );
        assert_eq!(status_in("error sending request for url"), None);
        assert_eq!(status_in("HTTP 99999"), None);
    }

    #[test]
    fn a_url_needs_http_or_https_and_a_wrong_path_gets_the_mcp_one() {
        assert!(check_scheme("HTTPS://example.com/mcp").is_ok());
        assert!(matches!(
            check_scheme("localhost:8722/mcp"),
            Err(ConnectionError::NoScheme { .. })
        ));
        assert!(matches!(
            check_scheme("ws://localhost:8722/mcp"),
            Err(ConnectionError::UnsupportedScheme { .. })
        ));
        assert_eq!(
            suggest_mcp_url("http://127.0.0.1:8722/api/"),
            "http://127.0.0.1:8722/mcp"
        );
    }
}
