//! A plain MCP server with one slow tool, `countdown`: the "other MCP server"
//! of the demo and of the tests behind `[[mcp.servers]]`.
//!
//! Unlike the other emulators it stands for no product. It has the shape most
//! slow MCP tools have in the wild: no tasks, `notifications/progress` while
//! it works, one `elicitation/create` when it needs the user, then a result —
//! and it is built on rmcp's server side, so the wire is the SDK's, not ours.
//!
//! ```text
//! tools/call countdown {seconds: 3, ask: true}   (with a progressToken)
//!   notifications/progress "3 s left", "2 s left", "1 s left"   (one a second)
//!   elicitation/create "Who should I greet?" {name}              (only with `ask`)
//!   result "Hello, Ada!"   (or "Done counting." without `ask`)
//! notifications/cancelled ─▶ the countdown stops, nothing is answered
//! ```
//!
//! Over HTTP a test can change its tool list: [`McpSim::offer_greet`] adds
//! (or removes) a second tool, `greet`, and announces the change with
//! `notifications/tools/list_changed` to every open session.
//!
//! `agentgate sim` serves it over Streamable HTTP at `/mcp`
//! (`--mcp-listen`); `agentgate sim --mcp-stdio` serves only it, on
//! stdin/stdout, the way `[[mcp.servers]] command` runs a server.
//!
//! Over HTTP it can require OAuth access tokens from its own client
//! credentials token endpoint ([`McpSim::new`] with an
//! [`OAuthClient`]): `POST /oauth/token` issues them, `/mcp` answers 401
//! with a `WWW-Authenticate: Bearer` challenge without a valid one, and
//! [`McpSim::revoke_tokens`] makes every issued token invalid at once.

use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ElicitRequestParams,
    ElicitationAction, Implementation, ListToolsResult, PaginatedRequestParams,
    ProgressNotificationParam, ProtocolVersion, ServerCapabilities, ServerConfig, Tool,
    ToolAnnotations,
};
use rmcp::service::{NotificationContext, Peer, RequestContext};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt as _};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::oauth::{OAuthClient, TOKEN_PATH, Tokens, token_request};

/// The tool's name.
pub const TOOL: &str = "countdown";
/// The longest countdown it accepts, in seconds.
pub const MAX_SECONDS: u64 = 3600;
/// Where [`McpSim::router`] serves it.
pub const MCP_PATH: &str = "/mcp";

/// The second tool, offered only while [`McpSim::offer_greet`] says so.
pub const GREET: &str = "greet";

/// The server, one value per connection; what may change (the tool list)
/// is shared by every connection of one [`McpSim`].
#[derive(Debug, Clone, Default)]
pub struct SlowToolServer {
    shared: Arc<Shared>,
}

/// The tool list and who hears of its changes.
#[derive(Debug, Default)]
struct Shared {
    greet: AtomicBool,
    /// The peers of sessions that said `notifications/initialized`.
    peers: Mutex<Vec<Peer<RoleServer>>>,
}

impl SlowToolServer {
    fn tools(&self) -> Vec<Tool> {
        let mut tools = vec![countdown_tool()];
        if self.shared.greet.load(Ordering::Relaxed) {
            tools.push(greet_tool());
        }
        tools
    }
}

/// `countdown`'s arguments.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CountdownArgs {
    seconds: u64,
    #[serde(default)]
    ask: bool,
}

fn countdown_tool() -> Tool {
    let schema = json!({
        "type": "object",
        "properties": {
            "seconds": {
                "type": "integer", "minimum": 0, "maximum": MAX_SECONDS,
                "description": "Seconds to count down, reporting progress each second."
            },
            "ask": {
                "type": "boolean", "default": false,
                "description": "At the end, ask who to greet (elicitation) and greet them."
            }
        },
        "required": ["seconds"],
        "additionalProperties": false
    });
    let Value::Object(schema) = schema else {
        unreachable!("a JSON object literal")
    };
    Tool::new(
        TOOL,
        "Counts down `seconds`, reporting progress each second; then, if `ask` is true, asks \
         who to greet and greets them. A slow tool of a plain MCP server (no tasks).",
        Arc::new(schema),
    )
    // It changes nothing anywhere, so calling it again is harmless.
    .annotate(ToolAnnotations::new().read_only(true).idempotent(true))
}

fn greet_tool() -> Tool {
    let schema = json!({
        "type": "object",
        "properties": {"name": {"type": "string", "description": "Who to greet."}},
        "required": ["name"],
        "additionalProperties": false
    });
    let Value::Object(schema) = schema else {
        unreachable!("a JSON object literal")
    };
    Tool::new(GREET, "Greets `name` at once.", Arc::new(schema))
        .annotate(ToolAnnotations::new().read_only(true).idempotent(true))
}

impl ServerHandler for SlowToolServer {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .build();
        ServerConfig::new(capabilities).with_server_info(Implementation::new(
            "agentgate-sim-mcp",
            env!("CARGO_PKG_VERSION"),
        ))
    }

    async fn on_initialized(&self, cx: NotificationContext<RoleServer>) {
        let mut peers = self
            .shared
            .peers
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        peers.retain(|peer| !peer.is_transport_closed());
        peers.push(cx.peer);
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Owned(vec![
            ProtocolVersion::V_2025_06_18,
            ProtocolVersion::V_2025_11_25,
        ])
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.tools().into_iter().find(|tool| tool.name == name)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if request.name == GREET && self.shared.greet.load(Ordering::Relaxed) {
            let name = request
                .arguments
                .as_ref()
                .and_then(|args| args.get("name"))
                .and_then(Value::as_str)
                .ok_or_else(|| ErrorData::invalid_params("greet: give `name`, a string", None))?;
            let text = format!("Hello, {name}!");
            return Ok(CallToolResult::success(vec![ContentBlock::text(text)]).into());
        }
        if request.name != TOOL {
            return Err(ErrorData::invalid_params(
                format!("unknown tool `{}`; this server has `{TOOL}`", request.name),
                None,
            ));
        }
        let args = Value::Object(request.arguments.clone().unwrap_or_default());
        let args: CountdownArgs = serde_json::from_value(args).map_err(|e| {
            ErrorData::invalid_params(
                format!("{TOOL}: {e} (expected {{\"seconds\": 0..={MAX_SECONDS}, \"ask\": bool}})"),
                None,
            )
        })?;
        if args.seconds > MAX_SECONDS {
            return Ok(error(format!(
                "field `seconds` is {}, at most {MAX_SECONDS} is allowed",
                args.seconds
            )));
        }
        // rmcp moves the request's `_meta` into the context.
        let token = cx.meta.get_progress_token();
        for done in 0..args.seconds {
            if let Some(token) = &token {
                let left = args.seconds - done;
                let progress = ProgressNotificationParam::new(token.clone(), done as f64)
                    .with_total(args.seconds as f64)
                    .with_message(format!("{left} s left"));
                // A client gone away is noticed by the cancel below.
                let _ = cx.peer.notify_progress(progress).await;
            }
            tokio::select! {
                () = cx.ct.cancelled() => return Err(ErrorData::internal_error("cancelled", None)),
                () = tokio::time::sleep(Duration::from_secs(1)) => {}
            }
        }
        if !args.ask {
            return Ok(CallToolResult::success(vec![ContentBlock::text("Done counting.")]).into());
        }
        let asked = tokio::select! {
            () = cx.ct.cancelled() => return Err(ErrorData::internal_error("cancelled", None)),
            asked = cx.peer.create_elicitation(who_to_greet()) => asked,
        };
        match asked {
            Ok(answer) => {
                let name = match answer.action {
                    ElicitationAction::Accept => answer
                        .content
                        .as_ref()
                        .and_then(|c| c["name"].as_str())
                        .map(str::to_owned),
                    // Declined, cancelled, or an action of a later revision.
                    _ => None,
                };
                let name = name.unwrap_or_else(|| "whoever you are".to_owned());
                Ok(
                    CallToolResult::success(vec![ContentBlock::text(format!("Hello, {name}!"))])
                        .into(),
                )
            }
            Err(e) => Ok(error(format!(
                "could not ask who to greet (the client must support form elicitation): {e}"
            ))),
        }
    }
}

/// A tool error the caller can act on.
fn error(text: String) -> CallToolResponse {
    CallToolResult::error(vec![ContentBlock::text(format!("Error: {text}"))]).into()
}

fn who_to_greet() -> ElicitRequestParams {
    let schema = json!({
        "type": "object",
        "properties": {"name": {"type": "string", "description": "Who to greet"}},
        "required": ["name"]
    });
    ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: "Who should I greet?".to_owned(),
        requested_schema: serde_json::from_value(schema)
            .unwrap_or_else(|e| unreachable!("a valid elicitation schema: {e}")),
    }
}

/// The scope its token endpoint issues.
pub const OAUTH_SCOPE: &str = "mcp";

/// The server over HTTP, with or without OAuth. Clones share one state.
#[derive(Debug, Clone, Default)]
pub struct McpSim {
    oauth: Option<Arc<OAuthState>>,
    server: SlowToolServer,
}

#[derive(Debug)]
struct OAuthState {
    client: OAuthClient,
    tokens: Mutex<Tokens>,
    issued: AtomicU64,
}

impl McpSim {
    /// Without `oauth`, anyone may call; with it, only bearers of a token
    /// its endpoint issued to that client.
    pub fn new(oauth: Option<OAuthClient>) -> Self {
        Self {
            oauth: oauth.map(|client| {
                Arc::new(OAuthState {
                    client,
                    tokens: Mutex::default(),
                    issued: AtomicU64::new(0),
                })
            }),
            server: SlowToolServer::default(),
        }
    }

    /// Offers the tool [`GREET`] (or stops offering it) and tells every
    /// open session with `notifications/tools/list_changed`. Returns how
    /// many sessions were told.
    pub async fn offer_greet(&self, on: bool) -> usize {
        let shared = &self.server.shared;
        shared.greet.store(on, Ordering::Relaxed);
        let peers: Vec<Peer<RoleServer>> = {
            let mut peers = shared.peers.lock().unwrap_or_else(PoisonError::into_inner);
            peers.retain(|peer| !peer.is_transport_closed());
            peers.clone()
        };
        let mut told = 0;
        for peer in peers {
            if peer.notify_tool_list_changed().await.is_ok() {
                told += 1;
            }
        }
        told
    }

    /// Every token issued so far stops being valid.
    pub fn revoke_tokens(&self) {
        if let Some(oauth) = &self.oauth {
            oauth
                .tokens
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .revoke_all();
        }
    }

    /// How many tokens the endpoint issued.
    pub fn tokens_issued(&self) -> u64 {
        self.oauth
            .as_ref()
            .map_or(0, |oauth| oauth.issued.load(Ordering::Relaxed))
    }

    /// The server over Streamable HTTP at [`MCP_PATH`] (and the token
    /// endpoint at [`TOKEN_PATH`] with OAuth); its open streams end at
    /// `shutdown`.
    pub fn router(&self, shutdown: CancellationToken) -> axum::Router {
        let service = StreamableHttpService::new(
            {
                let server = self.server.clone();
                move || Ok(server.clone())
            },
            Arc::new(LocalSessionManager::default()),
            StreamableHttpServerConfig::default().with_cancellation_token(shutdown),
        );
        let router = axum::Router::new().nest_service(MCP_PATH, service);
        let Some(oauth) = self.oauth.clone() else {
            return router;
        };
        router
            .layer(axum::middleware::from_fn_with_state(
                oauth.clone(),
                require_token,
            ))
            .route(TOKEN_PATH, axum::routing::post(token).with_state(oauth))
    }
}

async fn token(State(oauth): State<Arc<OAuthState>>, headers: HeaderMap, body: Bytes) -> Response {
    let (response, issued) = token_request(
        Some(&oauth.client),
        OAUTH_SCOPE,
        &mut oauth.tokens.lock().unwrap_or_else(PoisonError::into_inner),
        &headers,
        &body,
    );
    if issued {
        oauth.issued.fetch_add(1, Ordering::Relaxed);
    }
    response
}

/// `/mcp` only with a valid access token (RFC 6750 §3's challenge without).
async fn require_token(
    State(oauth): State<Arc<OAuthState>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let bearer = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    let valid = bearer.is_some_and(|token| {
        oauth
            .tokens
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .valid(token)
    });
    if valid {
        return next.run(request).await;
    }
    let challenge = if bearer.is_some() {
        "Bearer realm=\"agentgate-sim-mcp\", error=\"invalid_token\""
    } else {
        "Bearer realm=\"agentgate-sim-mcp\""
    };
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, challenge)],
        "a valid access token from the token endpoint is required\n",
    )
        .into_response()
}

/// Serves one client on stdin/stdout until it hangs up or `shutdown`.
pub async fn serve_stdio(shutdown: CancellationToken) -> anyhow::Result<()> {
    let service = SlowToolServer::default()
        .serve((tokio::io::stdin(), tokio::io::stdout()))
        .await
        .map_err(|e| anyhow::anyhow!("MCP handshake on stdio failed: {e}"))?;
    let cancel = service.cancellation_token();
    tokio::select! {
        done = service.waiting() => {
            done.map_err(|e| anyhow::anyhow!("MCP server on stdio stopped: {e}"))?;
        }
        () = shutdown.cancelled() => cancel.cancel(),
    }
    Ok(())
}
