//! `agentgate-bench`: end-to-end load benchmarks of agentgate over Streamable
//! HTTP, against rmcp `TaskManager` baselines (on rmcp's own plain stack, and
//! behind our HTTP stack) and a bare axum echo, in one run on one machine, so
//! the ratios between them mean something.
//!
//! ```text
//! cargo run --release -p agentgate-bench -- [--quick | --smoke] [--json FILE] [--markdown FILE]
//! ```
//!
//! Each server under test is this same binary re-executed as a child
//! (`agentgate-bench serve KIND`; [`serve`] says what each kind is), so it
//! has its own runtime and its peak RSS (`VmHWM`) is its own; the load comes
//! from this process. The full run writes its tables into `BENCHMARKS.md` between the
//! `bench:begin`/`bench:end` markers (the hand-written analysis around them
//! is kept); `--quick` (a first look) and `--smoke` (CI: one short round of
//! everything) print the tables and write Markdown only when `--markdown`
//! is given. No figure is ever asserted on.
//!
//! # Layout
//! - [`serve`]: the servers under test and the bench tool.
//! - [`client`]: the raw HTTP client every server is driven with.
//! - [`load`]: closed-loop load with warm-up, rounds and medians.
//! - [`seed`]: bulk SQL seeding for the scale and scheduler measurements.
//! - [`watch`]: the Copilot watcher against the GitHub emulator.
//! - [`bench`](mod@bench): the run: which server, which measurement, in what order.
//! - [`report`]: Markdown and JSON output.

mod bench;
mod client;
mod load;
mod report;
mod seed;
mod serve;
mod watch;

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};
use tracing_subscriber::EnvFilter;

#[derive(Debug, Parser)]
#[command(about = "End-to-end benchmarks: agentgate vs an rmcp baseline and a bare echo")]
struct Cli {
    /// Small counts and short rounds (a few minutes): a first look.
    #[arg(long, conflicts_with = "smoke")]
    quick: bool,

    /// One short round of every measurement (CI): proves the bench runs;
    /// no figure is worth reading.
    #[arg(long)]
    smoke: bool,

    /// Also write every figure as JSON to this file.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,

    /// Write the Markdown tables into this file (between the bench markers,
    /// keeping the rest). Default: BENCHMARKS.md for a full run, none for --quick.
    #[arg(long, value_name = "FILE")]
    markdown: Option<PathBuf>,

    /// PostgreSQL server to benchmark on (a throw-away database is created
    /// on it and dropped afterwards). Default: $AGENTGATE_BENCH_POSTGRES_URL,
    /// else postgres://postgres@127.0.0.1:5432/postgres if it answers.
    #[arg(long, value_name = "URL")]
    postgres: Option<String>,

    /// Skip PostgreSQL even if one is reachable.
    #[arg(long)]
    no_postgres: bool,

    #[command(subcommand)]
    serve: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Runs one server under test (used by the bench itself; see `serve`).
    #[command(hide = true)]
    Serve {
        kind: Kind,
        /// Task store URL (agentgate only).
        #[arg(long, default_value = "sqlite::memory:")]
        store: String,
        #[arg(long, default_value = "127.0.0.1:0")]
        listen: SocketAddr,
        /// Check bearer tokens (`[auth] mode = "tokens"`): the SHA-256 of
        /// the one token accepted (agentgate and baseline only).
        #[arg(long, value_name = "HEX")]
        token_sha256: Option<String>,
        /// Enforce no `[limits]` (agentgate only).
        #[arg(long)]
        no_limits: bool,
    },
    /// Applies a store's migrations and exits (used by the bench itself).
    #[command(hide = true)]
    Migrate {
        #[arg(long)]
        store: String,
    },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Kind {
    Agentgate,
    Baseline,
    BaselinePlain,
    BaselineAccept,
    Echo,
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    match cli.serve {
        Some(Command::Migrate { store }) => runtime.block_on(serve::migrate(&store)),
        Some(Command::Serve {
            kind,
            store,
            listen,
            token_sha256,
            no_limits,
        }) => runtime.block_on(async move {
            let layers = serve::Layers {
                token_sha256,
                no_limits,
            };
            match kind {
                Kind::Agentgate => serve::agentgate(listen, &store, &layers).await,
                Kind::Baseline => serve::baseline(listen, &layers).await,
                Kind::BaselinePlain => serve::baseline_plain(listen).await,
                Kind::BaselineAccept => serve::baseline_accept(listen).await,
                Kind::Echo => serve::echo(listen).await,
            }
        }),
        None => {
            let size = if cli.smoke {
                bench::RunSize::Smoke
            } else if cli.quick {
                bench::RunSize::Quick
            } else {
                bench::RunSize::Full
            };
            let options = bench::Options {
                size,
                json: cli.json,
                markdown: cli.markdown.or_else(|| {
                    (size == bench::RunSize::Full).then(|| PathBuf::from("BENCHMARKS.md"))
                }),
                postgres: if cli.no_postgres {
                    bench::PgChoice::Off
                } else {
                    match cli
                        .postgres
                        .or_else(|| std::env::var("AGENTGATE_BENCH_POSTGRES_URL").ok())
                    {
                        Some(url) => bench::PgChoice::Given(url),
                        None => bench::PgChoice::Probe(
                            "postgres://postgres@127.0.0.1:5432/postgres".to_owned(),
                        ),
                    }
                },
            };
            runtime.block_on(bench::run(options))
        }
    }
}
