//! The `agentgate` command: serve long-running AI agents over MCP as durable
//! tasks.
//!
//! `main` parses the command line, sets up logging (always to stderr: stdout
//! belongs to the MCP stdio transport) and hands over to the subcommand.

mod auth;
mod backends;
mod check;
mod client;
mod config;
mod demo;
#[cfg(test)]
mod docs_check;
mod serve;
mod signals;
mod tools;

use std::path::PathBuf;

use anyhow::{Context as _, Result};
use clap::{Parser, Subcommand, ValueEnum};

#[derive(Debug, Parser)]
#[command(
    name = "agentgate",
    version,
    long_version = LONG_VERSION,
    about = "Serve long-running AI agents over MCP as durable tasks",
    long_about = "agentgate is an MCP server that puts agentic backends behind the MCP Tasks \
                  extension: a client gets a task handle at once, follows the work with \
                  tasks/get, answers questions with tasks/update and can cancel; tasks survive \
                  restarts because every step is saved in the task store."
)]
struct Cli {
    /// TOML config file; command-line flags and environment variables override it.
    #[arg(long, global = true, env = "AGENTGATE_CONFIG", value_name = "FILE")]
    config: Option<PathBuf>,

    /// Log line format on stderr. Filter with RUST_LOG (default: info for
    /// agentgate, warn for the libraries it uses).
    #[arg(long, global = true, env = "AGENTGATE_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,

    #[command(subcommand)]
    command: Command,
}

/// This build's backends, for [`LONG_VERSION`] (`concat!` takes literals).
#[cfg(not(feature = "example-countdown"))]
macro_rules! built_backends {
    () => {
        "qbusiness, copilot, a2a, mcp"
    };
}
#[cfg(feature = "example-countdown")]
macro_rules! built_backends {
    () => {
        "qbusiness, copilot, a2a, mcp, countdown (example)"
    };
}

/// `agentgate --version`: the commit, and what this build speaks and serves
/// (a test checks these lists against the code).
const LONG_VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("AGENTGATE_COMMIT"),
    ")\nMCP protocol versions: 2025-06-18, 2025-11-25 (tasks), 2026-07-28 (tasks extension, SEP-2663)\n\
     backends: ",
    built_backends!(),
    "\nrmcp 3.11.0"
);

#[derive(Debug, Clone, Copy, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Try agentgate with no cloud account: the backends' emulators, the
    /// gateway (`serve`, configured for them), and a narrated walkthrough
    /// as an MCP client.
    Demo(demo::DemoArgs),
    /// Run the MCP server, over stdio (for desktop clients) or Streamable HTTP.
    Serve(serve::ServeArgs),
    /// Apply the task store's schema migrations and exit (`serve` applies
    /// them too; this is for deployments that migrate before rolling out).
    Migrate(serve::MigrateArgs),
    /// Run local emulators of the backends (Amazon Q Business, GitHub with a
    /// simulated Copilot agent, an A2A v1.0 agent) that speak the real wire
    /// protocols, for trying agentgate without a cloud account.
    // Boxed: the emulators' flags make it by far the largest variant.
    Sim(Box<agentgate_sim::SimArgs>),
    /// Call a tool on an MCP server and follow the task it starts; exit 0
    /// completed, 1 tool error, 2 failed/cancelled or error.
    Call(client::cli::CallArgs),
    /// List, inspect, wait for or cancel the tasks `agentgate call` started.
    Task(client::cli::TaskArgs),
    /// Manage HTTP authentication (`[auth]` in the config file).
    #[command(subcommand)]
    Auth(AuthCommand),
    /// List the tools `serve` would serve with this config, or show one
    /// tool's whole definition.
    Tools(tools::ToolsArgs),
    /// Print the shell completion script for SHELL (bash, zsh, fish,
    /// elvish, powershell), e.g. `agentgate completions bash >
    /// ~/.local/share/bash-completion/completions/agentgate`.
    Completions {
        /// The shell to complete in.
        shell: clap_complete::Shell,
    },
    /// Check that `serve` can work with this config and environment: the
    /// store, and each backend's settings and credentials (who they are
    /// upstream); exit 0 when nothing is broken, 1 otherwise.
    Check(serve::StoreArgs),
}

#[derive(Debug, Subcommand)]
enum AuthCommand {
    /// Make a bearer token for `[auth] mode = "tokens"`: prints the token
    /// (once; only its hash goes into the config) and the config entry.
    NewToken {
        /// Who holds the token; their tasks are owned by `token:PRINCIPAL`.
        #[arg(long)]
        principal: String,
    },
    /// List who may call under the config's `[auth]`, and where each token
    /// comes from (a hash's first digits, or its variable; never a token).
    List,
    /// Remove a principal's tokens from the config file (--config), keeping
    /// the rest of the file as written; `serve` reads tokens at start, so
    /// restart it.
    Revoke {
        /// The principal whose `[[auth.tokens]]` entries go.
        #[arg(long)]
        principal: String,
    },
}

/// What the log shows when `RUST_LOG` is not set.
///
/// The client's and the demo's output is for people and scripts: only
/// agentgate's own warnings, and nothing from rmcp, whose failures the
/// client turns into its own messages (rmcp's are `Debug` dumps of
/// transport internals). The server logs agentgate at `info` and its
/// dependencies at `warn`: at `info` rmcp alone writes three lines per
/// request, one a `Debug` dump of the client's capabilities.
fn default_filter(client: bool) -> &'static str {
    if client {
        "warn,rmcp=off"
    } else {
        // Targets match by prefix: `aws` covers every `aws_*` crate, `hyper`
        // covers `hyper_util`, `tower` covers `tower_http`.
        "info,rmcp=warn,hyper=warn,h2=warn,sqlx=warn,aws=warn,reqwest=warn,rustls=warn,tower=warn"
    }
}

/// Colour escapes only for a person at a terminal: never into a file or a
/// pipe, and never when `NO_COLOR` is set (no-color.org: to anything but
/// the empty string).
fn use_colour(stderr_is_terminal: bool, no_color: Option<std::ffi::OsString>) -> bool {
    stderr_is_terminal && no_color.is_none_or(|v| v.is_empty())
}

fn init_logging(format: LogFormat, default: &str) {
    use std::io::IsTerminal as _;
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let noise = tracing_subscriber::filter::filter_fn(|meta| !is_known_noise(meta));
    let colour = use_colour(
        std::io::stderr().is_terminal(),
        std::env::var_os("NO_COLOR"),
    );
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(colour);
    let registry = tracing_subscriber::registry().with(filter);
    match format {
        LogFormat::Text => registry
            .with(tracing_subscriber::Layer::with_filter(fmt, noise))
            .init(),
        LogFormat::Json => registry
            .with(tracing_subscriber::Layer::with_filter(fmt.json(), noise))
            .init(),
    }
}

/// rmcp events that report no fault of anyone's, at a level that says one.
///
/// rmcp (pinned at 3.11.0) logs an ERROR whenever a client closes a stream
/// whose request has already been answered in spirit, such as a
/// `subscriptions/listen` stream: the handler's final response has nowhere
/// to go because the client left. Depending on which of rmcp's tasks sees
/// the closed stream first, it says `failed to send pending response during
/// drain` or `fail to response message` (`channel closed`). That is how a
/// listen stream ends, so neither is logged. The events are matched by
/// their source lines, which are fixed for the pinned version
/// (`tests/it/listen_close.rs` fails if an upgrade moves them).
fn is_known_noise(meta: &tracing::Metadata<'_>) -> bool {
    meta.target() == "rmcp::service"
        && *meta.level() == tracing::Level::ERROR
        && meta.file().is_some_and(|f| f.ends_with("service.rs"))
        && meta
            .line()
            .is_some_and(|line| RMCP_CLIENT_LEFT_ERROR_LINES.contains(&line))
}

/// Where rmcp 3.11.0's `src/service.rs` logs a response that could not be
/// sent because the client left: the drain's send failure, and the
/// response task's.
const RMCP_CLIENT_LEFT_ERROR_LINES: [u32; 2] = [1866, 1578];

// Not `-> anyhow::Result<()>`: returning an error from `main` prints its
// `Debug` form, which carries a backtrace whenever RUST_BACKTRACE is set, and
// a wrong path in a config file is not a bug to trace.
#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let client = matches!(
        cli.command,
        Command::Call(_)
            | Command::Task(_)
            | Command::Demo(_)
            | Command::Auth(_)
            | Command::Tools(_)
            | Command::Check(_)
            | Command::Completions { .. }
    );
    init_logging(cli.log_format, default_filter(client));
    let format = cli.log_format;
    match Box::pin(run(cli)).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            match format {
                // Keep stderr machine-readable to the end: the failure is
                // one more JSON line, and the exit status says it failed.
                LogFormat::Json => tracing::error!(error = format!("{e:#}"), "agentgate failed"),
                // The cause chain on one line, outermost first.
                LogFormat::Text => eprintln!("error: {e:#}"),
            }
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> Result<()> {
    let file = match &cli.config {
        Some(path) => config::FileConfig::load(path)?,
        None => config::FileConfig::default(),
    };
    match cli.command {
        // Exit statuses carry the outcome; everything is dropped by now.
        Command::Call(args) => std::process::exit(client::cli::call(args).await),
        Command::Task(args) => std::process::exit(client::cli::task(args).await),
        Command::Demo(args) => demo::run(args).await,
        Command::Serve(args) => serve::run(args, file).await,
        Command::Migrate(args) => serve::migrate(args, file).await,
        Command::Auth(AuthCommand::NewToken { principal }) => auth::new_token(&principal),
        Command::Auth(AuthCommand::List) => auth::list(&file),
        Command::Auth(AuthCommand::Revoke { principal }) => {
            auth::revoke(cli.config.as_deref(), &principal)
        }
        Command::Tools(args) => tools::run(args, file).await,
        Command::Completions { shell } => {
            use clap::CommandFactory as _;
            clap_complete::generate(
                shell,
                &mut Cli::command(),
                "agentgate",
                &mut std::io::stdout(),
            );
            Ok(())
        }
        Command::Check(args) => {
            let healthy = check::run(args, file, cli.config.as_deref()).await?;
            std::process::exit(if healthy { 0 } else { 1 })
        }
        Command::Sim(args) => {
            let shutdown = tokio_util::sync::CancellationToken::new();
            let mut signals = signals::StopSignals::watch().context("watching for stop signals")?;
            let stop = shutdown.clone();
            tokio::spawn(async move {
                signals.recv().await;
                stop.cancel();
            });
            agentgate_sim::run(*args, shutdown).await
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory as _;

    #[test]
    fn cli_definition_is_consistent() {
        super::Cli::command().debug_assert();
    }

    #[test]
    fn the_long_version_names_every_protocol_version_and_backend() {
        let text = super::LONG_VERSION;
        for version in agentgate_core::mcp::Gateway::protocol_versions() {
            assert!(text.contains(version.as_str()), "{version:?}: {text}");
        }
        // The backends line names this build's list, in order, no more.
        let listed: Vec<&str> = text
            .lines()
            .find_map(|line| line.strip_prefix("backends: "))
            .expect("a backends line")
            .split(", ")
            .map(|entry| entry.trim_end_matches(" (example)"))
            .collect();
        let built: Vec<&str> = crate::backends::BACKENDS.iter().map(|b| b.name).collect();
        assert_eq!(listed, built, "{text}");
        let rmcp = format!("rmcp {}", env!("RMCP_VERSION"));
        assert!(text.contains(&rmcp), "{rmcp}: {text}");
    }

    #[test]
    fn colour_only_on_a_terminal_and_never_with_no_color() {
        use super::use_colour;
        assert!(use_colour(true, None));
        assert!(!use_colour(false, None), "a file or a pipe gets no escapes");
        assert!(!use_colour(true, Some("1".into())));
        assert!(
            use_colour(true, Some("".into())),
            "NO_COLOR set to nothing does not count"
        );
    }
}
