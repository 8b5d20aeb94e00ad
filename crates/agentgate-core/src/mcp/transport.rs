//! Entry points: MCP over stdio, and the axum router serving Streamable HTTP
//! at `/mcp`. Both take the shutdown token as an argument.

use rmcp::ServiceExt as _;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use super::Gateway;

/// Serves one client on this process's stdin/stdout until it disconnects or
/// `shutdown` fires.
pub async fn serve_stdio(gateway: Gateway, shutdown: CancellationToken) -> anyhow_free::Result {
    let service = gateway
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| std::io::Error::other(format!("stdio handshake failed: {e}")))?;
    let cancel = service.cancellation_token();
    tokio::select! {
        done = service.waiting() => {
            done.map_err(|e| std::io::Error::other(format!("stdio service stopped: {e}")))?;
        }
        () = shutdown.cancelled() => cancel.cancel(),
    }
    Ok(())
}

mod anyhow_free {
    pub type Result = std::result::Result<(), std::io::Error>;
}

/// HTTP settings for `/mcp`.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// Accepted `Host` header values (DNS-rebinding protection).
    pub allowed_hosts: Vec<String>,
    /// Accepted browser `Origin`s; requests without `Origin` always pass.
    pub allowed_origins: Vec<String>,
    pub max_body_bytes: usize,
}

impl Default for HttpOptions {
    fn default() -> Self {
        Self {
            allowed_hosts: vec!["localhost".into(), "127.0.0.1".into(), "::1".into()],
            allowed_origins: loopback_origins(),
            max_body_bytes: 4 * 1024 * 1024,
        }
    }
}

/// Browser origins on this machine, any port.
pub fn loopback_origins() -> Vec<String> {
    ["http", "https"]
        .iter()
        .flat_map(|scheme| {
            ["localhost", "127.0.0.1", "[::1]"]
                .iter()
                .map(move |host| format!("{scheme}://{host}:*"))
        })
        .collect()
}

/// The router: Streamable HTTP at `/mcp` (both protocol eras on one endpoint)
/// and a liveness probe at `/healthz`.
pub fn http_router(
    gateway: Gateway,
    options: HttpOptions,
    shutdown: CancellationToken,
) -> axum::Router {
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(options.allowed_hosts)
        .with_allowed_origins(options.allowed_origins)
        .enforce_origin_validation()
        .with_max_request_body_bytes(options.max_body_bytes)
        .with_cancellation_token(shutdown);
    let service = StreamableHttpService::new(
        move || Ok(gateway.clone()),
        LocalSessionManager::default().into(),
        config,
    );
    axum::Router::new()
        .nest_service("/mcp", service)
        .route("/healthz", axum::routing::get(|| async { "ok" }))
}
