//! Real faults for tests: a small filesystem that fills up, and a PostgreSQL
//! cluster of the test's own that it can stop and start.
//!
//! Both need what a CI machine has (root for `mount`, PostgreSQL's server
//! binaries). Where they are missing, [`unavailable`] ends the test, which
//! the [`harness`](crate::harness) reports `ignored` with the reason, or
//! fails it when `AGENTGATE_REQUIRE_FAULTS=1` (as `.ci/run` sets), so CI can
//! never pass a fault test that did not run.

use std::io::Write as _;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Ends a fault test that cannot run here because of `why` (see
/// [`harness::skip`](crate::harness::skip)).
pub fn unavailable(why: &str) -> ! {
    crate::harness::skip(crate::harness::Need::Faults, why)
}

/// A tmpfs of a fixed size, mounted on a fresh directory and unmounted on
/// drop: a disk that really fills up.
#[derive(Debug)]
pub struct SmallDisk {
    dir: tempfile::TempDir,
}

impl SmallDisk {
    /// Mounts a tmpfs of `bytes` bytes; `Err` says why it could not (not
    /// root, no `mount`).
    pub fn mount(bytes: u64) -> Result<Self, String> {
        let dir = tempfile::tempdir().map_err(|e| format!("tempdir: {e}"))?;
        let out = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={bytes},mode=0700"),
                "tmpfs",
            ])
            .arg(dir.path())
            .output()
            .map_err(|e| format!("cannot run mount: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "mount -t tmpfs failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(Self { dir })
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Writes `name` with zeros until the disk is full; returns the bytes
    /// written. Deleting the file frees them again.
    pub fn fill(&self, name: &str) -> u64 {
        let mut file = std::fs::File::create(self.path().join(name)).expect("create filler");
        let chunk = vec![0u8; 16 * 1024];
        let mut written = 0u64;
        loop {
            match file.write(&chunk) {
                Ok(0) | Err(_) => break,
                Ok(n) => written += n as u64,
            }
        }
        // Small writes take the last partial block.
        while let Ok(n) = file.write(&chunk[..512]) {
            if n == 0 {
                break;
            }
            written += n as u64;
        }
        let _ = file.sync_all();
        written
    }

    /// Frees what [`fill`](Self::fill) took.
    pub fn free(&self, name: &str) {
        std::fs::remove_file(self.path().join(name)).expect("remove filler");
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        // Lazy: a store still open in a leaked task must not keep it mounted.
        let _ = Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

/// A PostgreSQL cluster of the test's own, on a free loopback port: it can
/// be stopped (as in an outage) and started again on the same port and data.
/// Stopped and removed on drop.
#[derive(Debug)]
pub struct PgCluster {
    bin: PathBuf,
    data: tempfile::TempDir,
    port: u16,
    /// Run the server's tools as this user (`initdb` refuses root).
    user: Option<&'static str>,
}

impl PgCluster {
    /// Creates and starts a cluster; `Err` says why it could not (no server
    /// binaries, `initdb` failed).
    pub fn start() -> Result<Self, String> {
        let bin = server_bin().ok_or("no PostgreSQL server binaries under /usr/lib/postgresql")?;
        let root = nix_is_root();
        let user = root.then_some("postgres");
        let data = tempfile::Builder::new()
            .prefix("agentgate-pg-")
            .tempdir()
            .map_err(|e| format!("tempdir: {e}"))?;
        if let Some(user) = user {
            let status = Command::new("chown")
                .arg(format!("{user}:"))
                .arg(data.path())
                .status()
                .map_err(|e| format!("chown: {e}"))?;
            if !status.success() {
                return Err(format!("chown {user} {} failed", data.path().display()));
            }
        }
        let port = free_port()?;
        let cluster = Self {
            bin,
            data,
            port,
            user,
        };
        let pgdata = cluster.pgdata();
        cluster.run(
            "initdb",
            &[
                "-D",
                &pgdata,
                "-A",
                "trust",
                "-U",
                "postgres",
                "--no-sync",
                "-E",
                "UTF8",
            ],
        )?;
        cluster.start_again()?;
        Ok(cluster)
    }

    fn pgdata(&self) -> String {
        self.data.path().join("data").display().to_string()
    }

    fn run(&self, tool: &str, args: &[&str]) -> Result<(), String> {
        let exe = self.bin.join(tool);
        let mut command = match self.user {
            Some(user) => {
                let mut c = Command::new("runuser");
                c.args(["-u", user, "--"]).arg(&exe);
                c
            }
            None => Command::new(&exe),
        };
        let out = command
            .args(args)
            .output()
            .map_err(|e| format!("cannot run {tool}: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "{tool} failed: {}{}",
                String::from_utf8_lossy(&out.stdout).trim(),
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    }

    /// Starts the (stopped) server, waiting until it accepts connections.
    pub fn start_again(&self) -> Result<(), String> {
        let options = format!(
            // fsync stays on: the store refuses a server without it
            // (`agentgate_core::store::Durability::Full`).
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c max_connections=100",
            self.port,
            self.data.path().display()
        );
        let log = self.data.path().join("server.log").display().to_string();
        self.run(
            "pg_ctl",
            &[
                "-D",
                &self.pgdata(),
                "-o",
                &options,
                "-l",
                &log,
                "-w",
                "start",
            ],
        )
    }

    /// Stops the server the way an outage would: `fast` ends every session
    /// (rolling back open transactions); `immediate` is a crash.
    pub fn stop(&self, mode: &str) -> Result<(), String> {
        self.run("pg_ctl", &["-D", &self.pgdata(), "-m", mode, "-w", "stop"])
    }

    /// A URL for the cluster's `postgres` database.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    pub fn port(&self) -> u16 {
        self.port
    }
}

impl Drop for PgCluster {
    fn drop(&mut self) {
        let _ = self.stop("immediate");
    }
}

fn server_bin() -> Option<PathBuf> {
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .filter(|bin| bin.join("initdb").exists() && bin.join("pg_ctl").exists())
        .collect();
    versions.sort();
    versions.pop()
}

fn nix_is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).trim() == "0")
}

fn free_port() -> Result<u16, String> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("bind: {e}"))?;
    listener
        .local_addr()
        .map(|a| a.port())
        .map_err(|e| format!("local_addr: {e}"))
}
