//! The countdown backend on its own: an embedded SQLite store and stdio or
//! Streamable HTTP, through agentgate's runtime.
//!
//! ```sh
//! cargo run -p agentgate-example-countdown -- --listen 127.0.0.1:8740
//! cargo run -p agentgate-example-countdown -- --stdio
//! ```

use std::net::SocketAddr;

use agentgate_backend::Owner;
use agentgate_core::mcp::HttpOptions;
use agentgate_core::runtime::Runtime;
use agentgate_example_countdown::{Countdown, CountdownConfig};
use anyhow::{Context as _, Result};
use clap::Parser;

#[derive(Debug, Parser)]
#[command(about = "agentgate's example countdown backend, served on its own")]
struct Cli {
    /// Serve one client on stdin/stdout.
    #[arg(long, conflicts_with = "listen")]
    stdio: bool,
    /// Serve Streamable HTTP at http://ADDR/mcp.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8740")]
    listen: SocketAddr,
    /// Task store URL.
    #[arg(
        long,
        value_name = "URL",
        default_value = "sqlite://countdown-tasks.db"
    )]
    store: String,
}

#[tokio::main]
async fn main() -> Result<()> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let store = agentgate_core::store::open(&cli.store)
        .await
        .with_context(|| format!("opening {}", agentgate_core::store::redact_url(&cli.store)))?;
    let countdown = Countdown::new(CountdownConfig::default());
    let runtime = Runtime::builder(store).backend(countdown).start()?;
    let stop = runtime.shutdown_token().clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            stop.cancel();
        }
    });
    let served = if cli.stdio {
        runtime.serve_stdio(Owner::local_user()).await
    } else {
        let listener = tokio::net::TcpListener::bind(cli.listen)
            .await
            .with_context(|| format!("listening on {}", cli.listen))?;
        println!("listening http://{}/mcp", listener.local_addr()?);
        runtime.serve_http(listener, HttpOptions::default()).await
    };
    runtime.stop().await?;
    Ok(served?)
}
