//! `agentgate demo`: the whole point of agentgate in one command, with no
//! cloud account.
//!
//! ```text
//! Q Business emulator ◀─ChatSync (SigV4)─┐
//! GitHub emulator     ◀─GraphQL / REST───┤ agentgate serve (a child process: gateway.rs)
//! A2A agent emulator  ◀─A2A JSON-RPC─────┤   backends ◀─ engine ◀─ gateway (HTTP /mcp)
//! MCP server (stdio)  ◀─MCP──────────────┘                              ▲
//!                                    walkthrough: a real MCP client over HTTP
//! ```
//!
//! One process starts the three emulators on loopback, then `agentgate
//! serve` as a child ([`gateway`]) from a config file and environment
//! pointing at them, so the demo serves what `serve` serves, from the same
//! backend list: its store a SQLite file in a fresh temporary directory (or
//! `--store`), on `127.0.0.1:8722` (another free port if that one is
//! taken). The [`walkthrough`] then drives the gateway through the
//! `agentgate call` client as any MCP client would, narrating each step.
//! Afterwards the demo keeps serving and prints how to connect other clients
//! ([`connect`]), until Ctrl-C, SIGTERM or SIGHUP, each of which stops the
//! gateway child gracefully first; `--no-serve` exits with the walkthrough's
//! verdict instead.

mod connect;
mod gateway;
mod walkthrough;

use std::io::Write as _;
use std::net::SocketAddr;
use std::time::Duration;

use agentgate_sim::a2a::{self, A2aConfig, A2aSim};
use agentgate_sim::github::{self, GithubConfig, GithubSim};
use agentgate_sim::qbusiness::{self, QBusinessConfig, QBusinessSim};
use anyhow::{Context as _, Result, bail};
use clap::Args;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use self::gateway::GatewaySettings;
use crate::signals::StopSignals;

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
    // From here on a stop signal ends the demo through the code below,
    // which stops the gateway child: never an orphaned gateway.
    let mut signals = StopSignals::watch().context("watching for stop signals")?;
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
    let (listen, taken) = free_or_any(args.listen);
    let key_file = args
        .store_key
        .path(&crate::config::FileConfig::default(), &store_url)?;
    let mut gateway = gateway::start(
        GatewaySettings {
            listen,
            store_url: &store_url,
            store_key_file: key_file.as_deref(),
            dir: temp.path(),
        },
        &emulators,
    )
    .await?;
    if taken {
        println!(
            "port {} is taken; the gateway listens on {} instead",
            args.listen.port(),
            gateway
                .url
                .trim_start_matches("http://")
                .trim_end_matches("/mcp")
        );
    }
    println!(
        "{} gateway {}, Amazon Q Business emulator {}, GitHub emulator {}, A2A agent emulator {}",
        console::style("agentgate demo:").bold(),
        gateway.url,
        emulators.qbusiness_url,
        emulators.github_url,
        emulators.a2a_url
    );

    let report = tokio::select! {
        report = walkthrough::run(&gateway.url) => report,
        signal = signals.recv() => {
            // After SIGHUP the terminal may be gone: a failed write must
            // not stop the gateway from being stopped.
            let _ = writeln!(std::io::stdout(), "{signal}: stopping during the walkthrough");
            gateway.stop().await?;
            shutdown.cancel();
            bail!("stopped by {signal} before the walkthrough ended");
        }
    };
    report.print_summary();

    // Whatever happens while serving, the gateway is stopped gracefully
    // (its leases released), not killed.
    let served = async {
        if !args.no_serve {
            connect::print(&gateway.url, &store_url, &gateway.config, &emulators)?;
            // Ctrl-C reaches the gateway too (one terminal), so either may end first.
            tokio::select! {
                signal = signals.recv() => {
                    let _ = writeln!(std::io::stdout(), "{signal}: stopping");
                }
                exited = gateway.exited() => exited?,
            }
        }
        anyhow::Ok(())
    }
    .await;
    let stopped = gateway.stop().await;
    served?;
    stopped?;
    shutdown.cancel();
    // `temp` is removed here, after the gateway has closed the store.
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

/// `addr` if nothing listens there now, else the same address with any
/// port (and `true`, so the demo says so).
fn free_or_any(addr: SocketAddr) -> (SocketAddr, bool) {
    match std::net::TcpListener::bind(addr) {
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse && addr.port() != 0 => {
            (SocketAddr::new(addr.ip(), 0), true)
        }
        // Free (released here for the gateway to bind), or an error the
        // gateway will report with its own words.
        _ => (addr, false),
    }
}

impl Emulators {
    /// The environment that points Q Business and Copilot at the
    /// emulators: what a user would export for `agentgate serve`.
    pub(crate) fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ENDPOINT_URL_QBUSINESS", self.qbusiness_url.clone()),
            ("AWS_REGION", self.qbusiness.region.clone()),
            ("AWS_ACCESS_KEY_ID", self.qbusiness.access_key_id.clone()),
            (
                "AWS_SECRET_ACCESS_KEY",
                self.qbusiness.secret_access_key.clone(),
            ),
            (
                "QBUSINESS_APPLICATION_ID",
                self.qbusiness.application_id.clone(),
            ),
            ("GITHUB_API_URL", self.github_url.clone()),
            (
                "GITHUB_PERSONAL_ACCESS_TOKEN",
                github::DEFAULT_GITHUB_TOKEN.to_owned(),
            ),
        ]
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
