//! `conformance-fixture`: the server the official MCP conformance suite runs
//! against. It serves the suite's catalogue of tools, prompts, resources and
//! completions, and the SEP-2663 task fixtures as jobs on agentgate's engine
//! and task store, over Streamable HTTP at `/mcp` or over stdio.
//!
//! ```text
//! conformance-fixture --listen 127.0.0.1:3001 --store sqlite:///tmp/fixture.db
//! npx -y -p node@22 -p @modelcontextprotocol/conformance@0.2.0-alpha.12 -- \
//!     conformance server --url http://127.0.0.1:3001/mcp --requirements 2026-07-28
//! ```
//!
//! Over HTTP, the first line on stdout is `listening http://ADDR/mcp` once
//! connections are accepted (tests and scripts read it); logs go to stderr.

mod everything;
mod server;
mod tasks;

use std::net::SocketAddr;
use std::time::Duration;

use agentgate_backend::Owner;
use agentgate_core::engine::EngineConfig;
use agentgate_core::mcp::{HttpOptions, TransportKind, http_router, serve_http, serve_stdio};
use agentgate_core::runtime::{Runtime, RuntimeBuilder};
use agentgate_core::store::seal::SealKey;
use anyhow::Context as _;
use clap::Parser;
use tracing_subscriber::EnvFilter;

use crate::server::Fixture;

#[derive(Debug, Parser)]
#[command(
    version,
    about = "MCP conformance-suite fixture server on agentgate's engine"
)]
struct Cli {
    /// Serve Streamable HTTP at http://ADDR/mcp (port 0 picks a free port).
    #[arg(long, default_value = "127.0.0.1:3001", conflicts_with = "stdio")]
    listen: SocketAddr,

    /// Serve one client over stdin/stdout instead.
    #[arg(long)]
    stdio: bool,

    /// Task store URL.
    #[arg(long, default_value = "sqlite::memory:")]
    store: String,

    /// Lease length in seconds: how soon a restarted fixture takes over the
    /// tasks of one that died.
    #[arg(long, default_value_t = 30)]
    lease_seconds: u64,

    /// Steps this process runs at once. 0 runs none: the instance only
    /// answers requests, and relays other instances' changes to its clients.
    #[arg(long, default_value_t = 64)]
    concurrency: usize,

    /// How long clients without the tasks extension wait inline.
    #[arg(long, default_value_t = 30)]
    sync_budget_seconds: u64,

    /// Refuse `tasks/*` requests without an `Mcp-Name` header, as
    /// `server.strict_headers = true` does in `agentgate serve`.
    #[arg(long)]
    strict_headers: bool,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();

    let store = agentgate_core::store::open(&cli.store)
        .await
        .with_context(|| format!("opening store {}", cli.store))?;
    let config = EngineConfig {
        lease: Duration::from_secs(cli.lease_seconds.max(1)),
        idle_poll: Duration::from_millis(250),
        concurrency: cli.concurrency,
        store_key: store_key(&cli.store)?,
        ..EngineConfig::default()
    };
    // The limits `agentgate serve` enforces by default, so the suite runs
    // against them (fast polls are served from memory, for one).
    let runtime = tasks::tools(Duration::from_secs(cli.sync_budget_seconds))
        .into_iter()
        .fold(
            Runtime::builder(store)
                .config(config)
                .limits(agentgate_core::mcp::Limits::default()),
            RuntimeBuilder::tool,
        )
        .start()?;
    let shutdown = runtime.shutdown_token().clone();
    let stop = shutdown.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            stop.cancel();
        }
    });

    let kind = if cli.stdio {
        TransportKind::Stdio(Owner::local_user())
    } else {
        TransportKind::Http
    };
    let gateway = runtime.gateway(kind).await?.with_server_info(
        rmcp::model::Implementation::new(
            "agentgate-conformance-fixture",
            env!("CARGO_PKG_VERSION"),
        ),
        Some("agentgate fixture for the MCP conformance suite".to_owned()),
    );
    let fixture = Fixture::new(gateway);

    let served = if cli.stdio {
        serve_stdio(fixture, shutdown.clone())
            .await
            .context("serving stdio")
    } else {
        let listener = tokio::net::TcpListener::bind(cli.listen)
            .await
            .with_context(|| format!("binding {}", cli.listen))?;
        let local = listener.local_addr().context("reading the bound address")?;
        let options = HttpOptions {
            strict_headers: cli.strict_headers,
            ..HttpOptions::default()
        };
        let router = http_router(fixture, options, shutdown.clone());
        println!("listening http://{local}/mcp");
        tracing::info!("conformance fixture listening on http://{local}/mcp");
        serve_http(listener, router, shutdown.clone())
            .await
            .context("serving HTTP")
    };
    runtime.stop().await?;
    served
}

/// The key sealing the store's secrets: `AGENTGATE_STORE_KEY`, else a key
/// file beside a SQLite database (so a restarted fixture reads its own
/// secrets), else a fresh one.
fn store_key(url: &str) -> anyhow::Result<SealKey> {
    if let Ok(text) = std::env::var("AGENTGATE_STORE_KEY") {
        return Ok(SealKey::parse(&text)?);
    }
    Ok(match SealKey::default_file(url) {
        Some(path) => SealKey::load_or_create(&path)?,
        None => SealKey::generate(),
    })
}
