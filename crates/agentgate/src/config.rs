//! Settings: command-line flags over environment variables over the TOML
//! config file over defaults.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};
use serde::Deserialize;

/// The config file, `--config FILE`. Every key is optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    #[serde(default)]
    pub server: ServerSection,
    #[serde(default)]
    pub engine: EngineSection,
    /// The GitHub Copilot tools' knobs (`backend_copilot::CopilotConfig`).
    #[serde(default)]
    pub copilot: backend_copilot::CopilotConfig,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerSection {
    /// Address for Streamable HTTP, e.g. "127.0.0.1:8722".
    pub listen: Option<SocketAddr>,
    /// Task store URL, e.g. "sqlite:///var/lib/agentgate/tasks.db".
    pub store: Option<String>,
    /// Extra `Host` header values to accept (loopback names always are).
    #[serde(default)]
    pub allowed_hosts: Vec<String>,
    /// Extra browser origins to accept (loopback origins always are).
    #[serde(default)]
    pub allowed_origins: Vec<String>,
    pub max_body_bytes: Option<usize>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EngineSection {
    /// Steps run at once by this process.
    pub concurrency: Option<usize>,
    /// Seconds a claimed task stays leased without a heartbeat.
    pub lease_seconds: Option<u64>,
    /// Hours ended tasks are kept before the sweeper deletes them.
    pub retention_hours: Option<u64>,
    /// Seconds a task keeps retrying transient upstream failures (an
    /// upstream that is down, 5xx, throttling) before it fails; default 3600.
    pub retry_for_seconds: Option<u64>,
}

impl FileConfig {
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading config file {}", path.display()))?;
        let config: Self = toml::from_str(&text)
            .with_context(|| format!("parsing config file {}", path.display()))?;
        config
            .copilot
            .validate()
            .map_err(anyhow::Error::msg)
            .with_context(|| format!("checking config file {}", path.display()))?;
        Ok(config)
    }
}

/// Where the store lives when neither `--store` nor the config names one:
/// `tasks.db` in the user's data directory (e.g. ~/.local/share/agentgate).
pub fn default_store_url() -> Result<(String, PathBuf)> {
    let dirs = directories::ProjectDirs::from("dev", "agentgate", "agentgate").context(
        "no home directory to keep the task store in; pass --store sqlite:///path/to/tasks.db",
    )?;
    let path = dirs.data_dir().join("tasks.db");
    Ok((format!("sqlite://{}", path.display()), path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_keys_are_rejected_with_their_name() {
        let err = toml::from_str::<FileConfig>("[server]\nlisten_addr = \"x\"\n")
            .expect_err("typo must be refused");
        assert!(err.to_string().contains("listen_addr"), "{err}");
    }

    #[test]
    fn full_file_parses() {
        let cfg: FileConfig = toml::from_str(
            "[server]\nlisten = \"127.0.0.1:9000\"\nstore = \"sqlite:///tmp/x.db\"\n\
             [engine]\nconcurrency = 4\nlease_seconds = 10\n",
        )
        .expect("valid config");
        assert_eq!(
            cfg.server.listen,
            Some("127.0.0.1:9000".parse().expect("addr"))
        );
        assert_eq!(cfg.engine.concurrency, Some(4));
    }

    #[test]
    fn copilot_section_parses_and_refuses_typos() {
        let cfg: FileConfig =
            toml::from_str("[copilot]\nunassign_on_cancel = true\nmax_watch_minutes = 30\n")
                .expect("valid config");
        assert!(cfg.copilot.unassign_on_cancel);
        assert_eq!(cfg.copilot.max_watch_minutes, 30);
        assert_eq!(
            cfg.copilot.poll_min_ms, 1000,
            "unset keys keep their defaults"
        );
        let err = toml::from_str::<FileConfig>("[copilot]\nunassign = true\n")
            .expect_err("typo must be refused");
        assert!(err.to_string().contains("unassign"), "{err}");
    }
}
