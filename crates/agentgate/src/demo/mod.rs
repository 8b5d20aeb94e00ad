//! `agentgate demo`: the whole point of agentgate in one command, with no
//! cloud account.
//!
//! ```text
//! Q Business emulator ◀─ChatSync (SigV4)─┐
//! GitHub emulator     ◀─GraphQL / REST───┤ backends ◀─ engine ◀─ gateway (HTTP /mcp)
//! A2A agent emulator  ◀─A2A JSON-RPC─────┤                          ▲
//!                                        └──────── walkthrough: a real MCP client over HTTP
//! ```
//!
//! One process starts the three emulators on loopback, the engine on a SQLite
//! file in a fresh temporary directory (or `--store`), and the gateway on
//! `127.0.0.1:8722` (another free port if that one is taken). The
//! [`walkthrough`] then drives the gateway through the `agentgate call`
//! client as any MCP client would, narrating each step. Afterwards the demo
//! keeps serving and prints how to connect other clients ([`connect`]),
//! until Ctrl-C; `--no-serve` exits with the walkthrough's verdict instead.

mod connect;
mod walkthrough;

use std::net::SocketAddr;
use std::time::Duration;

use agentgate_core::engine::EngineConfig;
use agentgate_core::mcp::{HttpOptions, TransportKind, serve_http};
use agentgate_sim::a2a::{self, A2aConfig, A2aSim};
use agentgate_sim::github::{self, DEFAULT_GITHUB_TOKEN, GithubConfig, GithubSim};
use agentgate_sim::qbusiness::{self, QBusinessConfig, QBusinessSim};
use anyhow::{Context as _, Result, bail};
use backend_copilot::{CopilotConfig, Endpoint, Token};
use clap::Args;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use agentgate_core::runtime::Runtime;

use crate::serve::router;

#[derive(Debug, Args)]
pub(crate) struct DemoArgs {
    /// Where the gateway listens; if the port is taken, another free port on
    /// the same address is used (and the demo says so).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8722")]
    listen: SocketAddr,

    /// Task store URL. Default: a SQLite file in a fresh temporary
    /// directory, removed when the demo ends.
    #[arg(long, value_name = "URL")]
    store: Option<String>,

    #[command(flatten)]
    store_key: crate::serve::StoreKeyArgs,

    /// Exit after the walkthrough: status 0 when every step succeeded.
    #[arg(long)]
    no_serve: bool,

    /// The emulated Copilot agent's pace (1.0: a pull request after 5 s and
    /// 20 s of work; the default 0.2 makes that 1 s and 4 s).
    #[arg(long, value_name = "F", default_value_t = 0.2)]
    time_scale: f64,
}

/// The emulators' addresses and the settings a client of them needs.
#[derive(Debug, Clone)]
pub(crate) struct Emulators {
    pub qbusiness_url: String,
    pub github_url: String,
    pub a2a_url: String,
    pub qbusiness: QBusinessConfig,
}

/// The demo's A2A agent: its name, and so its tool `helper_send_message`.
pub(crate) const A2A_AGENT: &str = "helper";

/// The name of the MCP server behind the demo's gateway (its tools are
/// served as `example_…`).
pub(crate) const MCP_SERVER: &str = "example";

pub(crate) async fn run(args: DemoArgs) -> Result<()> {
    if !(args.time_scale > 0.0 && args.time_scale <= 10.0) {
        bail!(
            "--time-scale {} is out of range: give a factor above 0 and at most 10 (0.2 is quick)",
            args.time_scale
        );
    }
    let shutdown = CancellationToken::new();
    let temp = tempfile::Builder::new()
        .prefix("agentgate-demo-")
        .tempdir()
        .context("creating a temporary directory for the demo's task store")?;
    let store_url = match &args.store {
        Some(url) => url.clone(),
        None => format!("sqlite://{}", temp.path().join("tasks.db").display()),
    };

    let emulators = start_emulators(args.time_scale, &shutdown).await?;
    let store = agentgate_core::store::open(&store_url)
        .await
        .with_context(|| {
            format!(
                "opening task store {}",
                agentgate_core::store::redact_url(&store_url)
            )
        })?;
    let builder = Runtime::builder(store).config(EngineConfig {
        store_key: args
            .store_key
            .load(&crate::config::FileConfig::default(), &store_url)?,
        ..EngineConfig::default()
    });
    let endpoint = Endpoint::new(
        &emulators.github_url,
        Some(Token::new(DEFAULT_GITHUB_TOKEN)),
    )
    .context("the GitHub emulator's address")?;
    let copilot = backend_copilot::Copilot::new(endpoint, CopilotConfig::default())
        .with_upstream_metrics(builder.upstream_metrics("github"));
    let settings = backend_qbusiness::Settings {
        region: emulators.qbusiness.region.clone(),
        application_id: emulators.qbusiness.application_id.clone(),
        profile: None,
    };
    let client = settings.fixed_client(
        &emulators.qbusiness_url,
        &emulators.qbusiness.access_key_id,
        &emulators.qbusiness.secret_access_key,
        Some(builder.upstream_metrics("qbusiness")),
    );
    let qbusiness = backend_qbusiness::QBusinessQuery::with_client(settings, client);
    let a2a_config = backend_a2a::A2aBackend::parse(Some(serde_json::json!({
        "agents": [{ "name": A2A_AGENT, "url": emulators.a2a_url }],
        "poll_interval_ms": 200,
    })))?;
    let a2a = backend_a2a::A2aBackend::from_config(a2a_config, builder.upstream_metrics("a2a"))
        .await
        .context("starting the A2A backend against its emulator")?;
    let mcp = example_mcp_server(temp.path(), builder.upstream_metrics("mcp")).await?;
    let runtime = builder
        .backend(qbusiness)
        .backend(copilot)
        .backend(a2a)
        .backend(mcp)
        .start()?;

    let listener = bind(args.listen).await?;
    let url = format!("http://{}/mcp", listener.local_addr()?);
    let gateway = runtime.gateway(TransportKind::Http).await?;
    let served = tokio::spawn(serve_http(
        listener,
        router(
            gateway,
            runtime.probes(),
            HttpOptions::default(),
            runtime.shutdown_token().clone(),
        ),
        runtime.shutdown_token().clone(),
    ));
    println!(
        "{} gateway {url}, Amazon Q Business emulator {}, GitHub emulator {}, A2A agent emulator {}",
        console::style("agentgate demo:").bold(),
        emulators.qbusiness_url,
        emulators.github_url,
        emulators.a2a_url
    );

    let report = walkthrough::run(&url).await;
    report.print_summary();

    if !args.no_serve {
        connect::print(&url, &store_url, &emulators)?;
        tokio::signal::ctrl_c()
            .await
            .context("waiting for Ctrl-C")?;
        println!("stopping");
    }
    runtime.stop().await?;
    shutdown.cancel();
    served
        .await
        .context("gateway task")?
        .context("serving HTTP")?;
    // `temp` is removed here, after the store is closed.
    drop(temp);
    if args.no_serve && !report.all_passed() {
        bail!(
            "{} of {} demo steps failed",
            report.failed(),
            report.steps.len()
        );
    }
    Ok(())
}

/// The MCP server behind the demo's gateway: this binary's own example
/// backend (`countdown`) served over stdio by a child `agentgate serve
/// --stdio` on a store of its own, so the step needs nothing installed.
async fn example_mcp_server(
    dir: &std::path::Path,
    metrics: agentgate_backend::UpstreamMetrics,
) -> Result<backend_mcp::McpBackend> {
    let exe = std::env::current_exe().context("finding the agentgate binary for the MCP step")?;
    let config = dir.join("example-server.toml");
    std::fs::write(&config, "[countdown]\nenabled = true\n")
        .context("writing the example MCP server's config")?;
    let store = format!("sqlite://{}", dir.join("example-server.db").display());
    let section = serde_json::json!({"servers": [{
        "name": MCP_SERVER,
        "command": exe,
        "args": ["--config", config, "serve", "--stdio", "--store", store],
        "prefix": format!("{MCP_SERVER}_"),
    }]});
    let config = agentgate_backend::parse_section(backend_mcp::SECTION, Some(section))?;
    let backend = backend_mcp::McpBackend::from_config(config, metrics)
        .await
        .context("starting the MCP backend against the example server")?;
    Ok(backend)
}

/// Binds `addr`, or a free port on the same address if it is taken.
async fn bind(addr: SocketAddr) -> Result<TcpListener> {
    match TcpListener::bind(addr).await {
        Ok(listener) => Ok(listener),
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse && addr.port() != 0 => {
            let listener = TcpListener::bind(SocketAddr::new(addr.ip(), 0))
                .await
                .with_context(|| format!("listening on {} (any port)", addr.ip()))?;
            println!(
                "port {} is taken; the gateway listens on {} instead",
                addr.port(),
                listener.local_addr()?
            );
            Ok(listener)
        }
        Err(e) => Err(e).with_context(|| format!("listening on {addr}")),
    }
}

/// Starts the three emulators on free loopback ports, serving until `shutdown`.
async fn start_emulators(time_scale: f64, shutdown: &CancellationToken) -> Result<Emulators> {
    let config = QBusinessConfig::default();
    let sim = QBusinessSim::new(config.clone());
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .context("starting the Q Business emulator")?;
    let qbusiness_url = format!("http://{}", listener.local_addr()?);
    tokio::spawn(qbusiness::serve(listener, sim.router(), shutdown.clone()));

    let github_sim = GithubSim::new(GithubConfig {
        time_scale,
        ..GithubConfig::default()
    });
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .context("starting the GitHub emulator")?;
    let github_url = format!("http://{}", listener.local_addr()?);
    tokio::spawn(github::serve(
        listener,
        github_sim.router(),
        shutdown.clone(),
    ));

    let a2a_sim = A2aSim::new(A2aConfig::default());
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .context("starting the A2A agent emulator")?;
    let a2a_url = format!("http://{}", listener.local_addr()?);
    tokio::spawn(a2a::serve(listener, a2a_sim.router(), shutdown.clone()));

    Ok(Emulators {
        qbusiness_url,
        github_url,
        a2a_url,
        qbusiness: config,
    })
}

/// How long one walkthrough step may take before it counts as failed.
const STEP_DEADLINE: Duration = Duration::from_secs(45);
