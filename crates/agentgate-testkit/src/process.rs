//! A gateway process for a test: `agentgate serve` or the conformance
//! fixture, started on a free port with a chosen config file, environment and
//! store, killed when dropped.
//!
//! [`GateBuilder::start`] spawns the binary with `--listen 127.0.0.1:0`, waits for
//! the `listening <url>` line on stdout (the one place that line is parsed),
//! and keeps reading both streams in the background: stdout lines arrive on
//! [`Gate::next_line`], stderr is kept whole for [`Gate::stderr`] (and shown
//! when the process fails to start). [`Gate::terminate`] / [`Gate::kill`]
//! send SIGTERM / SIGKILL, [`Gate::wait`] reaps the exit status.
//!
//! `agentgate` runs with a cleared environment (only `PATH`, `HOME` = the
//! test's directory, `RUST_LOG=warn`, and empty AWS config files) so the
//! developer's own settings never reach a test.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

use crate::emulators::{Emulated, Emulator};

/// How long a process may take to print its listening line.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// The store key fixtures sharing a PostgreSQL store use (a test key, used
/// nowhere else); a SQLite store's key file sits beside the database.
const SHARED_STORE_KEY: &str = "5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// `agentgate [--config F] serve …`
    Agentgate,
    /// `conformance-fixture …`
    Fixture,
}

/// How to start a gateway process.
#[derive(Debug)]
pub struct GateBuilder {
    kind: Kind,
    bin: PathBuf,
    dir: PathBuf,
    config: Option<String>,
    config_path: Option<PathBuf>,
    store: Option<String>,
    env: Vec<(OsString, OsString)>,
    remove_env: Vec<OsString>,
    args: Vec<OsString>,
    listen: bool,
}

impl GateBuilder {
    /// `agentgate serve` (binary `bin`, e.g. `env!("CARGO_BIN_EXE_agentgate")`)
    /// with `dir` as its `HOME` and default SQLite store `dir/tasks.db`.
    pub fn agentgate(bin: impl Into<PathBuf>, dir: &Path) -> Self {
        Self::new(Kind::Agentgate, bin.into(), dir)
    }

    /// The conformance fixture (`env!("CARGO_BIN_EXE_conformance-fixture")`)
    /// with default SQLite store `dir/tasks.db`.
    pub fn fixture(bin: impl Into<PathBuf>, dir: &Path) -> Self {
        Self::new(Kind::Fixture, bin.into(), dir)
    }

    fn new(kind: Kind, bin: PathBuf, dir: &Path) -> Self {
        Self {
            kind,
            bin,
            dir: dir.to_owned(),
            config: None,
            config_path: None,
            store: None,
            env: Vec::new(),
            remove_env: Vec::new(),
            args: Vec::new(),
            listen: true,
        }
    }

    /// Writes `toml` to `dir/agentgate.toml` and passes `--config` with it.
    pub fn config(mut self, toml: &str) -> Self {
        self.config = Some(toml.to_owned());
        self
    }

    /// Passes `--config path` (a file the test wrote itself).
    pub fn config_file(mut self, path: &Path) -> Self {
        self.config_path = Some(path.to_owned());
        self
    }

    /// The store URL (`sqlite://…`, `postgres://…`).
    pub fn store(mut self, url: &str) -> Self {
        self.store = Some(url.to_owned());
        self
    }

    /// A SQLite store at `path`.
    pub fn sqlite(self, path: &Path) -> Self {
        let url = sqlite_url(path);
        self.store(&url)
    }

    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    pub fn envs<K: Into<OsString>, V: Into<OsString>>(
        mut self,
        vars: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        for (k, v) in vars {
            self.env.push((k.into(), v.into()));
        }
        self
    }

    /// Leaves `key` out even if something else set it.
    pub fn env_remove(mut self, key: impl Into<OsString>) -> Self {
        self.remove_env.push(key.into());
        self
    }

    /// The environment that points the gateway at `emulator`.
    pub fn upstream<S: Emulated>(self, emulator: &Emulator<S>) -> Self {
        self.envs(emulator.env())
    }

    /// Extra arguments (after `serve` for agentgate).
    pub fn arg(mut self, arg: impl Into<OsString>) -> Self {
        self.args.push(arg.into());
        self
    }

    pub fn args<A: Into<OsString>>(mut self, args: impl IntoIterator<Item = A>) -> Self {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Leaves `--listen 127.0.0.1:0` out: for `--stdio` (with
    /// [`Self::command`]) or a test's own `--listen` address.
    pub fn no_listen(mut self) -> Self {
        self.listen = false;
        self
    }

    fn store_url(&self) -> String {
        self.store
            .clone()
            .unwrap_or_else(|| sqlite_url(&self.dir.join("tasks.db")))
    }

    /// The command as configured, for a test that runs it its own way
    /// (expecting it to fail, reading its output whole).
    pub fn command(&self) -> Command {
        let mut cmd = Command::new(&self.bin);
        let store = self.store_url();
        match self.kind {
            Kind::Agentgate => {
                let empty = self.dir.join("aws-empty");
                std::fs::write(&empty, "").expect("write an empty AWS config file");
                cmd.env_clear()
                    .env("PATH", std::env::var_os("PATH").unwrap_or_default())
                    .env("HOME", &self.dir)
                    .env("RUST_LOG", "warn")
                    .env("AWS_CONFIG_FILE", &empty)
                    .env("AWS_SHARED_CREDENTIALS_FILE", &empty);
                if let Some(toml) = &self.config {
                    let path = self.dir.join("agentgate.toml");
                    std::fs::write(&path, toml).expect("write agentgate.toml");
                    cmd.arg("--config").arg(path);
                }
                if let Some(path) = &self.config_path {
                    cmd.arg("--config").arg(path);
                }
                cmd.arg("serve");
            }
            Kind::Fixture => {
                if !store.starts_with("sqlite:") {
                    // Instances sharing a PostgreSQL store need one key.
                    cmd.env("AGENTGATE_STORE_KEY", SHARED_STORE_KEY);
                }
            }
        }
        if self.listen {
            cmd.args(["--listen", "127.0.0.1:0"]);
        }
        cmd.arg("--store").arg(store).args(&self.args);
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        for k in &self.remove_env {
            cmd.env_remove(k);
        }
        cmd.kill_on_drop(true);
        cmd
    }

    /// Spawns the process and waits for its listening line.
    pub async fn start(self) -> Gate {
        let mut child = self
            .command()
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", self.bin.display()));
        let stderr = Arc::new(Mutex::new(String::new()));
        let (lines_tx, mut lines) = mpsc::unbounded_channel();
        let out = child.stdout.take().expect("piped stdout");
        tokio::spawn(async move {
            let mut out = BufReader::new(out).lines();
            while let Ok(Some(line)) = out.next_line().await {
                if lines_tx.send(line).is_err() {
                    break;
                }
            }
        });
        let err = child.stderr.take().expect("piped stderr");
        let kept = stderr.clone();
        tokio::spawn(async move {
            let mut err = BufReader::new(err);
            let mut chunk = vec![0u8; 8192];
            while let Ok(n) = err.read(&mut chunk).await {
                if n == 0 {
                    break;
                }
                kept.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push_str(&String::from_utf8_lossy(&chunk[..n]));
            }
        });
        let line = tokio::time::timeout(START_TIMEOUT, lines.recv()).await;
        let shown = |stderr: &Mutex<String>| {
            stderr
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone()
        };
        let line = match line {
            Ok(Some(line)) => line,
            Ok(None) => {
                let status = child.wait().await;
                // The stderr reader drops its handle once it read the end.
                crate::poll::eventually("stderr to be read", START_TIMEOUT, || {
                    Arc::strong_count(&stderr) == 1
                })
                .await;
                panic!(
                    "{} exited ({status:?}) before listening; stderr:\n{}",
                    self.bin.display(),
                    shown(&stderr)
                )
            }
            Err(_) => panic!(
                "{} printed no listening line in {START_TIMEOUT:?}; stderr:\n{}",
                self.bin.display(),
                shown(&stderr)
            ),
        };
        let url = listening_url(&line)
            .unwrap_or_else(|| panic!("expected `listening <url>`, got `{line}`"))
            .to_owned();
        Gate {
            child,
            url,
            lines,
            stderr,
        }
    }
}

/// The URL in a `listening <url>` line (the fixture may print it bare).
pub fn listening_url(line: &str) -> Option<&str> {
    let line = line.trim();
    line.strip_prefix("listening ")
        .or_else(|| line.starts_with("http").then_some(line))
}

pub fn sqlite_url(path: &Path) -> String {
    format!("sqlite://{}", path.display())
}

/// A running gateway process; killed when dropped.
#[derive(Debug)]
pub struct Gate {
    child: Child,
    /// Its MCP URL, from the listening line.
    pub url: String,
    lines: mpsc::UnboundedReceiver<String>,
    stderr: Arc<Mutex<String>>,
}

/// A test that fails with a gateway running shows the end of the
/// gateway's log: the cause of a failure in CI is often only there.
impl Drop for Gate {
    fn drop(&mut self) {
        if std::thread::panicking() {
            const SHOWN_LINES: usize = 200;
            let log = self.stderr();
            let lines: Vec<&str> = log.lines().collect();
            let from = lines.len().saturating_sub(SHOWN_LINES);
            eprintln!(
                "--- the gateway at {} logged ({} of {} lines):\n{}\n---",
                self.url,
                lines.len() - from,
                lines.len(),
                lines[from..].join("\n")
            );
        }
    }
}

impl Gate {
    /// The next stdout line after the listening line; `None` once stdout
    /// closed. Panics after 30 s.
    pub async fn next_line(&mut self) -> Option<String> {
        tokio::time::timeout(START_TIMEOUT, self.lines.recv())
            .await
            .expect("no stdout line within 30 s")
    }

    /// The next stdout line, which must start with `prefix`; without it.
    pub async fn line_after(&mut self, prefix: &str) -> String {
        let line = self
            .next_line()
            .await
            .unwrap_or_else(|| panic!("stdout closed before a `{prefix}…` line"));
        line.strip_prefix(prefix)
            .unwrap_or_else(|| panic!("expected `{prefix}…`, got `{line}`"))
            .to_owned()
    }

    /// Everything it wrote on stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Sends `signal`; an already reaped process is left alone.
    pub fn signal(&self, signal: Signal) {
        if let Some(pid) = self.child.id() {
            let pid = i32::try_from(pid).expect("a pid fits i32");
            kill(Pid::from_raw(pid), signal).unwrap_or_else(|e| panic!("{signal}: {e}"));
        }
    }

    /// SIGTERM: the graceful shutdown path.
    pub fn terminate(&self) {
        self.signal(Signal::SIGTERM);
    }

    /// SIGKILL: no shutdown path at all.
    pub fn kill(&self) {
        self.signal(Signal::SIGKILL);
    }

    /// SIGKILL, then reaps it.
    pub async fn kill_and_wait(mut self) -> ExitStatus {
        self.kill();
        self.wait().await
    }

    /// Waits (at most 30 s) for it to exit.
    pub async fn wait(&mut self) -> ExitStatus {
        tokio::time::timeout(START_TIMEOUT, self.child.wait())
            .await
            .expect("the process did not exit within 30 s")
            .expect("wait for the process")
    }

    /// Waits for it to exit, then for stdout and stderr to be read to
    /// their ends; returns the status and what stderr held.
    pub async fn wait_with_stderr(&mut self) -> (ExitStatus, String) {
        let status = self.wait().await;
        // stdout's end is seen on the line channel; stderr's reader ends
        // just after, and is given the moment it needs.
        while self.lines.recv().await.is_some() {}
        crate::poll::eventually("stderr to be read", START_TIMEOUT, || {
            Arc::strong_count(&self.stderr) == 1
        })
        .await;
        (status, self.stderr())
    }

    /// The child itself, for what the builder does not cover.
    pub fn child(&mut self) -> &mut Child {
        &mut self.child
    }
}
