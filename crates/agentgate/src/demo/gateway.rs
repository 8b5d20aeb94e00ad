//! The demo's gateway: `agentgate serve`, run as a child process from a
//! config file and environment written the way an operator would write them.
//!
//! ```text
//! demo ──writes──▶ agentgate.toml ([a2a] agent, [mcp] server) + the emulators' env
//!      ──spawns──▶ agentgate --config agentgate.toml serve --listen … --store …
//!                    (the backends of `serve`'s own list: backends.rs)
//!      ◀─"listening URL"── its stdout; its log goes to gateway.log
//! ```
//!
//! So the demo serves exactly what `serve` serves, through the same backend
//! list, settings and environment, and the printed config is one a user can
//! run again. The child's environment is only what is set here plus a few
//! harmless variables of the user's (see [`KEPT_ENV`]): an `AWS_PROFILE` or
//! a real GitHub token in the user's shell must not leak into the demo.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::process::{Child, Command};

use super::{A2A_AGENT, Emulators, MCP_SERVER};

/// The user's variables the child keeps: where things are, how to print,
/// how to log, the store key if the user gives one, and how to reach a
/// PostgreSQL store given with `--store` (libpq's variables, TLS roots).
const KEPT_ENV: &[&str] = &[
    "PATH",
    "TMPDIR",
    "LANG",
    "LC_ALL",
    "NO_COLOR",
    "RUST_LOG",
    "AGENTGATE_LOG_FORMAT",
    "AGENTGATE_STORE_KEY",
    "PGHOST",
    "PGPORT",
    "PGUSER",
    "PGPASSWORD",
    "PGPASSFILE",
    "PGDATABASE",
    "PGSSLMODE",
    "PGSSLROOTCERT",
    "PGSSLCERT",
    "PGSSLKEY",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
];

/// How long `serve` may take to say it listens.
const START_LIMIT: Duration = Duration::from_secs(60);

/// How long a stopping `serve` may take to release its tasks (its unit
/// allows 45 s; the demo's tasks have all ended by then).
const STOP_LIMIT: Duration = Duration::from_secs(45);

/// A running `agentgate serve` child.
pub(crate) struct DemoGateway {
    child: Child,
    /// Its MCP endpoint, `http://ADDR/mcp`.
    pub url: String,
    /// The config file it was started with.
    pub config: PathBuf,
    log: PathBuf,
}

/// What the child is started with, for [`start`].
pub(crate) struct GatewaySettings<'a> {
    /// The address asked for; port 0 for any.
    pub listen: std::net::SocketAddr,
    pub store_url: &'a str,
    /// The store key's file, resolved by the demo as `serve` would for the
    /// user (the child's home is not the user's); `None`: in memory.
    pub store_key_file: Option<&'a Path>,
    /// Where its config file, log and the MCP server's store go.
    pub dir: &'a Path,
}

/// Writes the config and starts `agentgate serve` against `emulators`.
pub(crate) async fn start(
    settings: GatewaySettings<'_>,
    emulators: &Emulators,
) -> Result<DemoGateway> {
    let exe = std::env::current_exe().context("finding the agentgate binary")?;
    let config = settings.dir.join("agentgate.toml");
    std::fs::write(&config, config_file(&exe, emulators)?)
        .with_context(|| format!("writing the demo's config {}", config.display()))?;
    let log = settings.dir.join("gateway.log");
    let log_file = std::fs::File::create(&log)
        .with_context(|| format!("creating the gateway's log {}", log.display()))?;

    let mut command = Command::new(&exe);
    command
        .arg("--config")
        .arg(&config)
        .args(["serve", "--listen", &settings.listen.to_string()])
        .args(["--store", settings.store_url]);
    if let Some(file) = settings.store_key_file {
        command.arg("--store-key-file").arg(file);
    }
    command.env_clear();
    for name in KEPT_ENV {
        if let Some(value) = std::env::var_os(name) {
            command.env(name, value);
        }
    }
    // No home of the user's: the AWS SDK would read ~/.aws for settings.
    // What a home gave (the store key's default place, ~/.pgpass) is passed
    // explicitly instead.
    if let Some(home) = std::env::var_os("HOME") {
        let pgpass = Path::new(&home).join(".pgpass");
        if std::env::var_os("PGPASSFILE").is_none() && pgpass.is_file() {
            command.env("PGPASSFILE", pgpass);
        }
    }
    command
        .env("HOME", settings.dir)
        .envs(emulators.env())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log_file)
        .kill_on_drop(true);
    let mut child = command
        .spawn()
        .with_context(|| format!("starting {} serve", exe.display()))?;

    let stdout = child.stdout.take().context("the gateway's stdout")?;
    let mut lines = BufReader::new(stdout).lines();
    let listening = async {
        while let Some(line) = lines.next_line().await? {
            if let Some(url) = line.strip_prefix("listening ") {
                return Ok::<_, std::io::Error>(Some(url.to_owned()));
            }
        }
        Ok(None)
    };
    let url = match tokio::time::timeout(START_LIMIT, listening).await {
        Ok(Ok(Some(url))) => url,
        Ok(Ok(None) | Err(_)) => bail!(
            "agentgate serve stopped before it listened; its log ({}):\n{}",
            log.display(),
            tail(&log)
        ),
        Err(_) => bail!(
            "agentgate serve did not listen within {}s; its log ({}):\n{}",
            START_LIMIT.as_secs(),
            log.display(),
            tail(&log)
        ),
    };
    // The rest of its stdout (a line naming its worker) is not the demo's.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Ok(DemoGateway {
        child,
        url,
        config,
        log,
    })
}

impl DemoGateway {
    /// Waits until the gateway exits by itself (it shares the terminal, so
    /// Ctrl-C reaches it too): an error with its log if that was a failure.
    pub(crate) async fn exited(&mut self) -> Result<()> {
        let status = self.child.wait().await.context("waiting for the gateway")?;
        if status.success() {
            return Ok(());
        }
        bail!(
            "the gateway stopped ({status}); its log ({}):\n{}",
            self.log.display(),
            tail(&self.log)
        )
    }

    /// Stops the gateway as its unit would (SIGTERM, so steps release
    /// their leases), and kills it if it has not stopped in [`STOP_LIMIT`].
    pub(crate) async fn stop(mut self) -> Result<()> {
        if let Some(pid) = self.child.id() {
            let pid =
                nix::unistd::Pid::from_raw(i32::try_from(pid).context("the gateway's process id")?);
            // It may have stopped already (Ctrl-C reached it too).
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        }
        match tokio::time::timeout(STOP_LIMIT, self.child.wait()).await {
            Ok(status) => {
                let status = status.context("waiting for the gateway to stop")?;
                // Exited 0, or ended by our SIGTERM (or the terminal's
                // Ctrl-C) before its handler ran; any other signal is a crash.
                let stopped_by = std::os::unix::process::ExitStatusExt::signal(&status);
                if status.success()
                    || stopped_by == Some(nix::sys::signal::Signal::SIGTERM as i32)
                    || stopped_by == Some(nix::sys::signal::Signal::SIGINT as i32)
                {
                    return Ok(());
                }
                bail!(
                    "the gateway stopped with {status}; its log ({}):\n{}",
                    self.log.display(),
                    tail(&self.log)
                )
            }
            Err(_) => {
                self.child.kill().await.context("killing the gateway")?;
                bail!(
                    "the gateway did not stop within {}s of SIGTERM and was killed",
                    STOP_LIMIT.as_secs()
                )
            }
        }
    }
}

/// The config an operator would write for the demo's A2A agent and MCP
/// server. Q Business and Copilot need no table: they read the
/// environment ([`Emulators::env`]).
fn config_file(exe: &Path, emulators: &Emulators) -> Result<String> {
    let config = serde_json::json!({
        "a2a": {
            "poll_interval_ms": 200,
            "agents": [{ "name": A2A_AGENT, "url": emulators.a2a_url }],
        },
        "mcp": {
            "servers": [{
                "name": MCP_SERVER,
                "command": exe,
                // The emulators' plain MCP server with a slow tool, on stdio.
                "args": ["sim", "--mcp-stdio"],
                "prefix": format!("{MCP_SERVER}_"),
            }],
        },
    });
    let config: toml::Table =
        serde_json::from_value(config).context("the demo's config as TOML")?;
    let header = "# agentgate demo: the gateway's config, written by `agentgate demo`.\n\
                  # Q Business and Copilot read their emulators from the environment.\n";
    Ok(format!(
        "{header}{}",
        toml::to_string(&config).context("writing the config")?
    ))
}

/// The last lines of a log, for an error.
fn tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}
