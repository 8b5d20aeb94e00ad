//! `agentgate serve`: open the store, start the scheduler, serve MCP; and
//! `agentgate migrate`: open the store (applying its migrations) and exit.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use agentgate_backend::Owner;
use agentgate_core::auth::client::TrustedProxies;
use agentgate_core::auth::{AuthConfig, AuthMode, Authenticator};
use agentgate_core::engine::EngineConfig;
use agentgate_core::mcp::{
    ConnectionLimits, Gateway, HttpOptions, TransportKind, http_router, serve_http_with,
    serve_stdio,
};
use agentgate_core::metrics;
use agentgate_core::runtime::{Probes, Runtime};
use agentgate_core::store;
use agentgate_core::store::Durability;
use agentgate_core::store::seal::SealKey;
use anyhow::{Context as _, Result, bail};
use clap::Args;
use tokio_util::sync::CancellationToken;

use crate::config::{EngineSection, FileConfig, default_data_file, default_store_url};
use crate::signals::StopSignals;

#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// Serve one client over stdin/stdout (what desktop MCP clients spawn).
    #[arg(long, conflicts_with = "listen")]
    stdio: bool,

    /// Serve Streamable HTTP at http://ADDR/mcp, e.g. 127.0.0.1:8722
    /// (localhost:8722 is the same).
    #[arg(long, env = "AGENTGATE_LISTEN", value_name = "ADDR", value_parser = parse_listen)]
    listen: Option<SocketAddr>,

    /// Task store: sqlite://PATH (the file is created on first use, in a
    /// directory that must exist) or postgres://USER@HOST/DB (shared by
    /// several instances). Default: tasks.db in the user's data directory.
    #[arg(long, env = "AGENTGATE_STORE", value_name = "URL")]
    store: Option<String>,

    #[command(flatten)]
    durability: DurabilityArgs,

    /// Steps this process runs at once.
    #[arg(long, env = "AGENTGATE_CONCURRENCY")]
    concurrency: Option<usize>,

    #[command(flatten)]
    store_key: StoreKeyArgs,

    /// Also accept this Host header (repeatable); loopback names always pass.
    #[arg(long = "allowed-host", value_name = "HOST")]
    allowed_hosts: Vec<String>,

    /// Also accept this browser Origin, e.g. `https://app.example.com:443`
    /// (repeatable); loopback origins always pass.
    #[arg(long = "allowed-origin", value_name = "ORIGIN")]
    allowed_origins: Vec<String>,

    /// Serve HTTP on a non-loopback address with `[auth] mode = "none"`
    /// (every caller is `anonymous`): only when something in front, such as
    /// an authenticating proxy, decides who may connect.
    #[arg(long, env = "AGENTGATE_ALLOW_UNAUTHENTICATED")]
    allow_unauthenticated: bool,

    /// Serve only these tools, comma-separated, each a tool's name or a
    /// backend's (all of its tools), e.g. `QBusinessQueryTool,copilot`;
    /// task_status, task_answer and task_cancel are always served.
    /// Default: `server.tools` of the config file, else every tool.
    #[arg(
        long,
        env = "AGENTGATE_TOOLS",
        value_name = "NAMES",
        value_delimiter = ','
    )]
    tools: Vec<String>,

    /// Serve only the tools marked read-only (`readOnlyHint: true`, e.g. an
    /// MCP server's read-only tools), after --tools; the task tools stay.
    /// A tool that says nothing is taken to change something. Default:
    /// `server.read_only` of the config file, else off.
    #[arg(long, env = "AGENTGATE_READ_ONLY")]
    read_only: bool,
}

/// Where the key that seals the store's secrets comes from.
#[derive(Debug, Args)]
pub(crate) struct StoreKeyArgs {
    /// File holding the store key (64 hex digits or base64 of 32 bytes),
    /// created with a random key if missing. Every instance on one store
    /// needs the same key. Default: beside a SQLite database
    /// (tasks.db.key), or store.key in the user's data directory for
    /// PostgreSQL. AGENTGATE_STORE_KEY (the key itself) takes precedence.
    #[arg(long, env = "AGENTGATE_STORE_KEY_FILE", value_name = "FILE")]
    store_key_file: Option<PathBuf>,
}

impl StoreKeyArgs {
    /// The store key: `AGENTGATE_STORE_KEY`, else the key file (see
    /// [`Self::path`]).
    pub(crate) fn load(&self, file: &FileConfig, store_url: &str) -> Result<SealKey> {
        if let Ok(text) = std::env::var("AGENTGATE_STORE_KEY") {
            return SealKey::parse(&text).context("reading AGENTGATE_STORE_KEY");
        }
        let Some(path) = self.path(file, store_url)? else {
            return Ok(SealKey::generate());
        };
        let key = SealKey::load_or_create(&path)?;
        tracing::info!(file = %path.display(), "store key loaded");
        Ok(key)
    }

    /// Where the key file of `store_url` is: the flag, then the config,
    /// then beside a SQLite file, else in the user's data directory; `None`
    /// for an in-memory store (a key that lives as long as it does).
    pub(crate) fn path(&self, file: &FileConfig, store_url: &str) -> Result<Option<PathBuf>> {
        match self
            .store_key_file
            .clone()
            .or_else(|| file.server.store_key_file.clone())
            .or_else(|| SealKey::default_file(store_url))
        {
            Some(path) => Ok(Some(path)),
            None if store_url.contains(":memory:") => Ok(None),
            None => default_data_file("store.key").map(Some),
        }
    }
}

/// The store of `migrate` and `check`: as `serve` names it.
#[derive(Debug, Args)]
pub(crate) struct StoreArgs {
    /// Task store: sqlite://PATH or postgres://USER@HOST/DB, as for `serve`.
    #[arg(long, env = "AGENTGATE_STORE", value_name = "URL")]
    store: Option<String>,

    #[command(flatten)]
    durability: DurabilityArgs,
}

impl StoreArgs {
    /// Opens the store these flags (or the config, or the default) name,
    /// applying its pending migrations; also returns its URL, redacted.
    pub(crate) async fn open(
        self,
        file: &FileConfig,
    ) -> Result<(Arc<dyn store::TaskStore>, String)> {
        let url = store_url(self.store, file)?;
        let store = open_store(&url, self.durability.resolve(file)).await?;
        Ok((store, store::redact_url(&url)))
    }
}

/// When the store acknowledges a write (`server.store_durability`).
#[derive(Debug, Args)]
pub(crate) struct DurabilityArgs {
    /// `full` (default): a write is acknowledged once it is on disk, and a
    /// PostgreSQL server with `fsync` or `synchronous_commit` off is
    /// refused. `relaxed`: a power cut may lose the last acknowledged
    /// writes (SQLite `synchronous = NORMAL`; PostgreSQL served as set).
    #[arg(
        long = "store-durability",
        env = "AGENTGATE_STORE_DURABILITY",
        value_name = "full|relaxed",
        value_parser = parse_durability
    )]
    store_durability: Option<Durability>,
}

impl DurabilityArgs {
    /// The flag over the config file over the default (`full`).
    fn resolve(&self, file: &FileConfig) -> Durability {
        self.store_durability
            .or(file.server.store_durability)
            .unwrap_or_default()
    }
}

fn parse_durability(value: &str) -> Result<Durability, String> {
    value.parse()
}

/// A listen address: `IP:PORT` (`[::1]:PORT` for IPv6), or `localhost:PORT`
/// for the IPv4 loopback. A bare `:PORT` is refused with both readings:
/// some tools take it for every interface, which on a gateway is a decision
/// to make explicitly.
pub(crate) fn parse_listen(value: &str) -> Result<SocketAddr, String> {
    if let Ok(addr) = value.parse() {
        return Ok(addr);
    }
    let (host, port) = value.rsplit_once(':').ok_or_else(|| {
        format!("`{value}` is not an address: write HOST:PORT, e.g. 127.0.0.1:8722")
    })?;
    let port: u16 = port
        .parse()
        .map_err(|_| format!("`{value}`: the port `{port}` is not a number from 0 to 65535"))?;
    match host {
        "" => Err(format!(
            "`{value}` names no host: write 127.0.0.1:{port} for this machine only, or \
             0.0.0.0:{port} for every interface (which needs authentication)"
        )),
        h if h.eq_ignore_ascii_case("localhost") => Ok(SocketAddr::from(([127, 0, 0, 1], port))),
        _ => Err(format!(
            "`{value}`: `{host}` is not an IP address; write the address to listen on, e.g. \
             127.0.0.1:{port}, 0.0.0.0:{port} or [::]:{port}"
        )),
    }
}

/// `agentgate migrate`: opening a store applies its pending migrations
/// (under an advisory lock on PostgreSQL, so racing instances are safe).
///
/// With `--status`, nothing is applied: each migration is listed as
/// `applied` or `pending`, and the command fails while any is pending.
pub(crate) async fn migrate(args: MigrateArgs, file: FileConfig) -> Result<()> {
    if !args.status {
        let (_, url) = args.store.open(&file).await?;
        println!("migrated {url}");
        return Ok(());
    }
    let url = store_url(args.store.store, &file)?;
    let shown = store::redact_url(&url);
    let migrations = store::migration_status(&url)
        .await
        .with_context(|| format!("reading the migrations of {shown}"))?;
    for m in &migrations {
        let state = if m.applied { "applied" } else { "pending" };
        println!("{state}  {:>4}  {}", m.version, m.description);
    }
    let pending = migrations.iter().filter(|m| !m.applied).count();
    if pending > 0 {
        bail!(
            "{shown} has {pending} pending migration(s): run `agentgate migrate` (or `serve`) to apply them"
        );
    }
    println!("{shown} is up to date");
    Ok(())
}

/// `agentgate migrate`.
#[derive(Debug, Args)]
pub(crate) struct MigrateArgs {
    #[command(flatten)]
    store: StoreArgs,
    /// Apply nothing: list each migration as applied or pending, and fail
    /// while any is pending.
    #[arg(long)]
    status: bool,
}

/// The store to open: `--store`, else `server.store`, else `tasks.db` in
/// the user's data directory, which is created if need be. A named SQLite
/// path's directory is never created (the store refuses it, so a typo
/// cannot start an empty store in its place).
fn store_url(flag: Option<String>, file: &FileConfig) -> Result<String> {
    if let Some(url) = flag.or_else(|| file.server.store.clone()) {
        return Ok(url);
    }
    let (url, path) = default_store_url()?;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("creating the data directory {}", dir.display()))?;
    }
    Ok(url)
}

/// The engine settings of `[engine]` (and `--concurrency`) over the
/// defaults. A value below its floor is refused, naming the key and the
/// floor, rather than raised silently.
fn engine_config(concurrency: Option<usize>, engine: &EngineSection) -> Result<EngineConfig> {
    fn at_least(key: &str, value: u64, floor: u64, why: &str) -> Result<u64> {
        if value < floor {
            bail!("{key} = {value} is below its minimum of {floor} ({why}); set {floor} or more");
        }
        Ok(value)
    }
    let mut config = EngineConfig::default();
    if let Some(n) = concurrency.or(engine.concurrency) {
        if n == 0 {
            bail!("--concurrency / engine.concurrency = 0 would run no step; set 1 or more");
        }
        config.concurrency = n;
    }
    if let Some(secs) = engine.lease_seconds {
        let why = "a lease must outlast a heartbeat and a slow store write";
        config.lease = Duration::from_secs(at_least("engine.lease_seconds", secs, 3, why)?);
    }
    if let Some(hours) = engine.retention_hours {
        // Saturating: a wrapped product would be a tiny retention, and the
        // sweep would delete every ended task.
        config.retention = Duration::from_secs(hours.saturating_mul(3600));
    }
    if let Some(secs) = engine.sweep_seconds {
        let why = "the sweep would run without pause";
        config.sweep_every = Duration::from_secs(at_least("engine.sweep_seconds", secs, 1, why)?);
    }
    if let Some(hours) = engine.max_lifetime_hours {
        config.max_lifetime = (hours > 0).then(|| Duration::from_secs(hours.saturating_mul(3600)));
    }
    if let Some(secs) = engine.retry_for_seconds {
        config.retry_for = Duration::from_secs(secs);
    }
    if let Some(secs) = engine.max_backoff_seconds {
        let why = "a failing step would be retried at once, without pause";
        config.max_backoff =
            Duration::from_secs(at_least("engine.max_backoff_seconds", secs, 1, why)?);
    }
    if let Some(bytes) = engine.max_result_bytes {
        let why = "an ordinary result, or the failure saying it is too large, must fit";
        let bytes = at_least("engine.max_result_bytes", bytes, 1024, why)?;
        config.max_result_bytes = usize::try_from(bytes).unwrap_or(usize::MAX);
    }
    Ok(config)
}

async fn open_store(url: &str, durability: Durability) -> Result<Arc<dyn store::TaskStore>> {
    let store = store::open_with(url, durability)
        .await
        .with_context(|| format!("opening task store {}", store::redact_url(url)))?;
    tracing::info!(store = %store::redact_url(url), ?durability, "task store ready");
    Ok(store)
}

pub(crate) async fn run(args: ServeArgs, file: FileConfig) -> Result<()> {
    let listen = args.listen.or(file.server.listen);
    if !args.stdio && listen.is_none() {
        bail!("say how to serve: --stdio, or --listen ADDR (e.g. --listen 127.0.0.1:8722)");
    }
    if !args.stdio
        && let Some(addr) = listen
    {
        refuse_open_listen(addr, &file.auth, args.allow_unauthenticated)?;
    }
    let store_url = store_url(args.store, &file)?;
    let limits = file.limits.to_limits().context("reading [limits]")?;
    let store = open_store(&store_url, args.durability.resolve(&file)).await?;

    let mut config = engine_config(args.concurrency, &file.engine)?;
    config.store_key = args.store_key.load(&file, &store_url)?;
    tracing::info!(worker = %config.worker_id, "lease owner id of this instance");
    let worker = config.worker_id.clone();
    let read_only = args.read_only || file.server.read_only == Some(true);
    let builder = Runtime::builder(store)
        .config(config)
        .limits(limits)
        .read_only(read_only);
    let selection = Some(args.tools)
        .filter(|names| !names.is_empty())
        .or_else(|| file.server.tools.clone());
    let runtime = crate::backends::add_all(builder, &file.backends, selection)
        .await?
        .start()?;
    crate::backends::log_setup(&runtime, &file.backends)?;
    let shutdown = runtime.shutdown_token().clone();
    let signals = StopSignals::watch().context("watching for stop signals")?;
    tokio::spawn(stop_on_signal(shutdown.clone(), signals));

    let served = if args.stdio {
        let gateway = runtime
            .gateway(TransportKind::Stdio(Owner::local_user()))
            .await?;
        tracing::info!("serving MCP on stdio");
        serve_stdio(gateway, shutdown.clone())
            .await
            .context("serving stdio")
    } else {
        let addr = listen.context("no listen address")?;
        let gateway = runtime.gateway(TransportKind::Http).await?;
        let connections = connection_limits(&file.server)?;
        let mut http = HttpOptions::default();
        http.allowed_hosts.extend(args.allowed_hosts);
        http.allowed_hosts.extend(file.server.allowed_hosts);
        http.allowed_origins.extend(args.allowed_origins);
        http.allowed_origins.extend(file.server.allowed_origins);
        if let Some(max) = file.server.max_body_bytes {
            http.max_body_bytes = max;
        }
        if let Some(max) = file.server.max_buffered_body_bytes {
            http.max_buffered_body_bytes = max;
        }
        if http.max_buffered_body_bytes < http.max_body_bytes {
            // One body of the largest size must fit, or it is always refused.
            bail!(
                "server.max_buffered_body_bytes ({}) must be at least server.max_body_bytes ({})",
                http.max_buffered_body_bytes,
                http.max_body_bytes
            );
        }
        http.strict_headers = file.server.strict_headers;
        if let Some(total) = file.server.max_sessions {
            http.sessions.total = total;
        }
        if let Some(per_principal) = file.limits.max_sessions {
            http.sessions.per_principal = per_principal;
        }
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .with_context(|| format!("listening on {addr}"))?;
        let url = format!("http://{}/mcp", listener.local_addr()?);
        http.auth = Authenticator::from_config(&file.auth, &url, |name| std::env::var(name).ok())
            .context("checking the [auth] section of the config file")?;
        match &http.auth {
            Some(_) => tracing::info!(mode = ?file.auth.mode, "HTTP callers must authenticate"),
            None => tracing::info!("HTTP callers are not authenticated: every task is anonymous's"),
        }
        tracing::info!(%url, "serving MCP over Streamable HTTP");
        // The first stdout line, for scripts and tests that bind port 0; the
        // second names this instance's leases (`lease_owner` in the store).
        // One write, errors ignored: a reader that closes the pipe after the
        // first line (`| head -1`) must not bring the server down.
        {
            use std::io::Write as _;
            let mut stdout = std::io::stdout().lock();
            let _ = write!(stdout, "listening {url}\nworker {worker}\n");
            let _ = stdout.flush();
        }
        serve_http_with(
            listener,
            router(gateway, runtime.probes(), http, shutdown.clone())
                .merge(runtime.webhook_router()),
            connections,
            shutdown.clone(),
        )
        .await
        .context("serving HTTP")
    };
    runtime.stop().await?;
    served
}

/// `[server]`'s connection bounds over the defaults.
pub(crate) fn connection_limits(server: &crate::config::ServerSection) -> Result<ConnectionLimits> {
    let mut limits = ConnectionLimits::default();
    if let Some(n) = server.max_connections {
        if n == 0 {
            bail!("server.max_connections must be at least 1 (the default is 768)");
        }
        limits.max_connections = n;
    }
    if let Some(n) = server.max_connections_per_peer {
        if n == 0 || n > limits.max_connections {
            bail!(
                "server.max_connections_per_peer must be between 1 and server.max_connections \
                 ({}), not {n}",
                limits.max_connections
            );
        }
        limits.max_connections_per_peer = Some(n);
    }
    let seconds = |name: &str, value: u64| -> Result<Duration> {
        if value == 0 || value > 86_400 {
            bail!("server.{name} must be between 1 and 86400 seconds, not {value}");
        }
        Ok(Duration::from_secs(value))
    };
    if let Some(secs) = server.header_read_timeout_seconds {
        limits.header_read_timeout = seconds("header_read_timeout_seconds", secs)?;
    }
    if let Some(secs) = server.idle_timeout_seconds {
        limits.idle_timeout = seconds("idle_timeout_seconds", secs)?;
    }
    if let Some(secs) = server.body_read_timeout_seconds {
        limits.body_read_timeout = seconds("body_read_timeout_seconds", secs)?;
    }
    limits.trusted_proxies = TrustedProxies::parse(&server.trusted_proxies)?;
    Ok(limits)
}

/// Refuses `--listen` on a non-loopback address when nobody authenticates
/// callers, unless `--allow-unauthenticated` says something else does.
fn refuse_open_listen(addr: SocketAddr, auth: &AuthConfig, allowed: bool) -> Result<()> {
    if addr.ip().is_loopback() || auth.mode != AuthMode::None || allowed {
        return Ok(());
    }
    bail!(
        "refusing to serve {addr} without authentication: anyone who can reach it could start \
         tasks and read every anonymous task. Configure [auth] in the config file \
         (mode = \"tokens\" with [[auth.tokens]] entries made by \
         `agentgate auth new-token --principal NAME`, or mode = \"oauth\" with \
         [auth.oauth] issuer = \"https://…\"), listen on 127.0.0.1, or pass \
         --allow-unauthenticated (AGENTGATE_ALLOW_UNAUTHENTICATED=true) if a proxy in front \
         authenticates"
    )
}

/// Everything served over HTTP: `/mcp`, `/healthz`, `/readyz`, `/metrics`
/// (the backends' webhooks, `/hooks/…`, are merged in by the caller).
/// With authentication on, `/metrics` needs a token too (it names tools and
/// counts everyone's tasks); the probes stay open for orchestrators.
pub(crate) fn router(
    gateway: Gateway,
    probes: Probes,
    http: HttpOptions,
    shutdown: CancellationToken,
) -> axum::Router {
    let ready = probes.clone();
    let mut metrics = axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || metrics_page(probes.clone())),
    );
    if let Some(auth) = &http.auth {
        metrics = auth.protect_routes(metrics);
    }
    http_router(gateway, http, shutdown)
        .route(
            "/readyz",
            axum::routing::get(move || readiness(ready.clone())),
        )
        .merge(metrics)
}

/// `/metrics`: Prometheus metrics in the OpenMetrics text format (the task
/// gauge is read from the store now; 503 when the store does not answer).
async fn metrics_page(probes: Probes) -> axum::response::Response {
    use axum::response::IntoResponse as _;
    match probes.metrics().await {
        Ok(text) => (
            [(axum::http::header::CONTENT_TYPE, metrics::CONTENT_TYPE)],
            text,
        )
            .into_response(),
        // Without authentication `/metrics` is open: the driver's message
        // (user, host, why the login failed) goes to the log only.
        Err(e) => {
            tracing::warn!(error = %e, "/metrics: the task store did not answer");
            unavailable(store_reason(&e))
        }
    }
}

/// `/readyz`: 200 when the task store answers a query, 503 with a reason
/// code otherwise (`/healthz` only says the process serves HTTP). It
/// answers within [`READINESS_TIMEOUT`] whatever the store does, so an
/// orchestrator's short probe sees a 503, not a time-out. The probe is
/// unauthenticated, so the answer names a code, never the driver's message
/// (which can carry the database user, host and login failure); that is
/// logged at warn.
async fn readiness(probes: Probes) -> axum::response::Response {
    use axum::response::IntoResponse as _;
    match tokio::time::timeout(READINESS_TIMEOUT, probes.store_answers()).await {
        Ok(Ok(_)) => (axum::http::StatusCode::OK, "ready\n").into_response(),
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "/readyz: the task store did not answer");
            unavailable(store_reason(&e))
        }
        Err(_) => {
            tracing::warn!(
                timeout = ?READINESS_TIMEOUT,
                "/readyz: the task store did not answer in time"
            );
            unavailable("store_timeout")
        }
    }
}

/// A stable code for a store failure, safe to show anyone:
/// `store_unreachable`, `store_busy`, `store_disk_full`, `store_read_only`,
/// or `store_error` for anything else.
fn store_reason(error: &store::StoreError) -> &'static str {
    match error.outage() {
        Some(store::Outage::Unreachable) => "store_unreachable",
        Some(store::Outage::Busy) => "store_busy",
        Some(store::Outage::DiskFull) => "store_disk_full",
        Some(store::Outage::ReadOnly) => "store_read_only",
        _ => "store_error",
    }
}

/// 503 `{"status": "unavailable", "reason": <code>}`.
fn unavailable(reason: &str) -> axum::response::Response {
    use axum::response::IntoResponse as _;
    (
        axum::http::StatusCode::SERVICE_UNAVAILABLE,
        axum::Json(serde_json::json!({"status": "unavailable", "reason": reason})),
    )
        .into_response()
}

/// How long `/readyz` waits for the store.
const READINESS_TIMEOUT: Duration = Duration::from_millis(800);

async fn stop_on_signal(shutdown: CancellationToken, mut signals: StopSignals) {
    let signal = signals.recv().await;
    tracing::info!(signal, "shutting down");
    shutdown.cancel();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_takes_localhost_and_refuses_a_bare_port_naming_both_readings() {
        assert_eq!(
            parse_listen("localhost:8722"),
            Ok(SocketAddr::from(([127, 0, 0, 1], 8722)))
        );
        assert_eq!(parse_listen("[::1]:9"), Ok("[::1]:9".parse().expect("v6")));
        let bare = parse_listen(":8722").expect_err("refused");
        assert!(
            bare.contains("127.0.0.1:8722") && bare.contains("0.0.0.0:8722"),
            "{bare}"
        );
        let name = parse_listen("gateway.internal:8722").expect_err("refused");
        assert!(name.contains("not an IP address"), "{name}");
        let port = parse_listen("127.0.0.1:http").expect_err("refused");
        assert!(port.contains("port `http`"), "{port}");
        let config: crate::config::ServerSection =
            toml::from_str("listen = \"localhost:8722\"").expect("parses");
        assert_eq!(
            config.listen,
            Some(SocketAddr::from(([127, 0, 0, 1], 8722)))
        );
        let refused = toml::from_str::<crate::config::ServerSection>("listen = \":8722\"")
            .expect_err("refused")
            .to_string();
        assert!(refused.contains("names no host"), "{refused}");
    }

    #[test]
    fn absurd_engine_settings_saturate_instead_of_wrapping() {
        let engine = EngineSection {
            retention_hours: Some(u64::MAX),
            lease_seconds: Some(u64::MAX),
            ..EngineSection::default()
        };
        let config = engine_config(None, &engine).expect("valid");
        // u64::MAX hours is more seconds than a u64 holds: a wrapping product
        // would be a retention of hours, and the sweep would delete every
        // ended task at its next run.
        assert_eq!(config.retention, Duration::from_secs(u64::MAX));
        assert_eq!(config.lease, Duration::from_secs(u64::MAX));
        let huge = EngineSection {
            max_result_bytes: Some(u64::MAX),
            ..EngineSection::default()
        };
        assert_eq!(
            engine_config(None, &huge).expect("valid").max_result_bytes,
            usize::try_from(u64::MAX).unwrap_or(usize::MAX)
        );
        assert_eq!(
            engine_config(None, &EngineSection::default())
                .expect("valid")
                .max_result_bytes,
            4 * 1024 * 1024
        );
    }

    /// Issue 33: a value below its floor was raised silently (a lease of
    /// 1 s became 3 s); it is refused, naming the key and the floor.
    #[test]
    fn engine_settings_below_their_floor_are_refused_by_key() {
        let refused = |engine: EngineSection| {
            engine_config(None, &engine)
                .expect_err("refused")
                .to_string()
        };
        let lease = refused(EngineSection {
            lease_seconds: Some(1),
            ..EngineSection::default()
        });
        assert!(
            lease.contains("engine.lease_seconds = 1 is below its minimum of 3"),
            "{lease}"
        );
        let backoff = refused(EngineSection {
            max_backoff_seconds: Some(0),
            ..EngineSection::default()
        });
        assert!(backoff.contains("engine.max_backoff_seconds"), "{backoff}");
        let result = refused(EngineSection {
            max_result_bytes: Some(10),
            ..EngineSection::default()
        });
        assert!(result.contains("minimum of 1024"), "{result}");
        let none = engine_config(Some(0), &EngineSection::default())
            .expect_err("refused")
            .to_string();
        assert!(none.contains("engine.concurrency = 0"), "{none}");
        let floors = EngineSection {
            lease_seconds: Some(3),
            max_backoff_seconds: Some(1),
            max_result_bytes: Some(1024),
            ..EngineSection::default()
        };
        let config = engine_config(Some(1), &floors).expect("the floors themselves are valid");
        assert_eq!(config.lease, Duration::from_secs(3));
        assert_eq!(config.max_result_bytes, 1024);
    }

    #[test]
    fn server_connection_settings_are_checked_and_defaulted() {
        let parse = |toml: &str| {
            let file = FileConfig::parse(toml).expect("parses");
            connection_limits(&file.server)
        };
        let limits = parse("[server]\nmax_connections = 40\n").expect("valid");
        assert_eq!(limits.per_peer(), 10, "a quarter of the cap by default");
        assert_eq!(limits.body_read_timeout, Duration::from_secs(30));
        let limits = parse(
            "[server]\nmax_connections = 40\nmax_connections_per_peer = 40\n\
             body_read_timeout_seconds = 5\ntrusted_proxies = [\"127.0.0.1\", \"10.0.0.0/8\"]\n",
        )
        .expect("valid");
        assert_eq!(limits.per_peer(), 40);
        assert_eq!(limits.body_read_timeout, Duration::from_secs(5));
        assert!(limits.trusted_proxies.contains([10, 1, 2, 3].into()));
        for (bad, named) in [
            (
                "max_connections = 4\nmax_connections_per_peer = 5",
                "max_connections_per_peer",
            ),
            ("max_connections_per_peer = 0", "max_connections_per_peer"),
            ("body_read_timeout_seconds = 0", "body_read_timeout_seconds"),
            ("trusted_proxies = [\"nginx\"]", "trusted_proxies"),
        ] {
            let err = parse(&format!("[server]\n{bad}\n")).expect_err(bad);
            assert!(format!("{err:#}").contains(named), "{bad}: {err:#}");
        }
    }
}
