//! Settings: command-line flags over environment variables over the TOML
//! config file over defaults.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};
use serde::Deserialize;

/// The config file, `--config FILE`. Every key is optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FileConfig {
    #[serde(default)]
    pub server: ServerSection,
    #[serde(default)]
    pub engine: EngineSection,
    /// Per-principal limits and caps.
    #[serde(default)]
    pub limits: LimitsSection,
    /// Who may call `/mcp` (`agentgate_core::auth`, whose docs list the keys).
    #[serde(default)]
    pub auth: agentgate_core::auth::AuthConfig,
    /// Each backend's own table (`[copilot]`, `[qbusiness]`), by name, for
    /// the backend to read (see `crate::backends`).
    #[serde(skip)]
    pub backends: BTreeMap<String, serde_json::Value>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ServerSection {
    /// Address for Streamable HTTP, e.g. "127.0.0.1:8722" ("localhost:8722"
    /// is the same).
    #[serde(default, deserialize_with = "listen_address")]
    pub listen: Option<SocketAddr>,
    /// Task store URL, e.g. "sqlite:///var/lib/agentgate/tasks.db".
    pub store: Option<String>,
    /// When a write is acknowledged: "full" (default: once on disk; a
    /// PostgreSQL server with `fsync` or `synchronous_commit` off is
    /// refused) or "relaxed" (a power cut may lose the last acknowledged
    /// writes). See `agentgate_core::store::Durability`.
    pub store_durability: Option<agentgate_core::store::Durability>,
    /// Serve only these tools, each a tool's name or a backend's (all of
    /// its tools); `task_status`, `task_answer` and `task_cancel` are always
    /// served. Default: every tool.
    pub tools: Option<Vec<String>>,
    /// Serve only tools marked read-only (`readOnlyHint`), after `tools`;
    /// the task tools stay. Default false.
    pub read_only: Option<bool>,
    /// Extra `Host` header values to accept (loopback names always are).
    #[serde(default)]
    pub allowed_hosts: Vec<String>,
    /// Extra browser origins to accept (loopback origins always are).
    #[serde(default)]
    pub allowed_origins: Vec<String>,
    pub max_body_bytes: Option<usize>,
    /// Request body bytes held at once across all requests (default 64
    /// MiB; at least `max_body_bytes`); past it a request gets 503.
    pub max_buffered_body_bytes: Option<usize>,
    /// Refuse `tasks/get|update|cancel` without an `Mcp-Name` header
    /// (default false: a missing one is accepted, a mismatched one refused).
    #[serde(default)]
    pub strict_headers: bool,
    /// HTTP connections served at once (default 768); more wait in the
    /// kernel's backlog until one closes.
    pub max_connections: Option<usize>,
    /// Connections one client address (an IPv6 /64) may hold; default a
    /// quarter of `max_connections`, at least 1. Trusted proxies are exempt.
    pub max_connections_per_peer: Option<usize>,
    /// Seconds a new connection has, from its accept, to send a whole
    /// request head (HTTP/1) or open a stream (HTTP/2) (default 10).
    pub header_read_timeout_seconds: Option<u64>,
    /// Seconds a connection may have no request in flight before it is
    /// closed (default 60; PINGs do not count, streams are in flight).
    pub idle_timeout_seconds: Option<u64>,
    /// Seconds a request body has to arrive, from its head (default 30).
    pub body_read_timeout_seconds: Option<u64>,
    /// Reverse proxies (addresses or CIDR blocks) whose `X-Forwarded-For` /
    /// `Forwarded` headers name the client; default none, so every client
    /// is its TCP peer.
    #[serde(default)]
    pub trusted_proxies: Vec<String>,
    /// File with the key that seals the store's secrets (see
    /// `agentgate serve --help`, `--store-key-file`).
    pub store_key_file: Option<PathBuf>,
    /// Legacy (`initialize`) sessions open at once on this instance, in all
    /// (default 4096; 0 = no cap); per principal: `limits.max_sessions`.
    pub max_sessions: Option<usize>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct EngineSection {
    /// Steps run at once by this process.
    pub concurrency: Option<usize>,
    /// Seconds a claimed task stays leased without a heartbeat.
    pub lease_seconds: Option<u64>,
    /// Hours ended tasks are kept before the sweeper deletes them.
    pub retention_hours: Option<u64>,
    /// Hours a task may live however much progress it makes (a TTL counts
    /// from the last progress); default 720 (30 days), 0 = no bound.
    pub max_lifetime_hours: Option<u64>,
    /// Seconds between two sweeps (expiring overdue tasks, deleting old
    /// ended ones); default 30.
    pub sweep_seconds: Option<u64>,
    /// Seconds a task keeps retrying transient upstream failures (an
    /// upstream that is down, 5xx, throttling) before it fails; default 3600.
    pub retry_for_seconds: Option<u64>,
    /// The longest wait between two retries of a failing step, in seconds
    /// (default 300; backoff starts at 1 s and doubles).
    pub max_backoff_seconds: Option<u64>,
    /// The most bytes of JSON one step may store (its result or error, or
    /// its state, status and input requests); a step producing more fails
    /// its task with an error naming this setting. Default 4 MiB, at least
    /// 1 KiB.
    pub max_result_bytes: Option<u64>,
}

/// `[limits]`: per-principal limits and caps (`agentgate_core::mcp::limits`
/// says what each does). A principal is the authenticated caller; without
/// authentication every HTTP caller is one principal, `anonymous`. Defaults:
///
/// ```toml
/// [limits]
/// max_active_tasks = 200          # live tasks per principal; 0 = no cap
/// requests_per_second = 100.0     # per principal, per instance; 0 = no limit
/// request_burst = 500             # requests at once after idling
/// max_principals = 10000          # principals whose rate is tracked at once
/// poll_burst = 20                 # tasks/get of one task per pollIntervalMs; 0 = never refused
/// max_input_response_bytes = 1048576  # inputResponses, as JSON
/// max_ttl_seconds = 604800        # longest task TTL (7 days); 0 = no cap
/// poll_cache_bytes = 33554432     # tasks/get answers kept in memory (32 MiB); 0 = none
/// max_listens = 16                # open subscriptions/listen streams per principal; 0 = no cap
/// max_sessions = 64               # open legacy (initialize) sessions per principal; 0 = no cap
/// max_stored_tasks = 10000        # tasks kept stored per principal, live and ended; 0 = no quota
/// max_stored_bytes = 1073741824   # JSON bytes of those tasks (1 GiB); 0 = no quota
/// ```
///
/// Ended tasks count toward the storage quotas until the sweeper deletes
/// them, `engine.retention_hours` after they end.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct LimitsSection {
    pub max_active_tasks: Option<u64>,
    pub requests_per_second: Option<f64>,
    pub request_burst: Option<u32>,
    pub max_principals: Option<usize>,
    pub poll_burst: Option<u32>,
    pub max_input_response_bytes: Option<usize>,
    pub max_ttl_seconds: Option<u64>,
    pub poll_cache_bytes: Option<usize>,
    pub max_listens: Option<u32>,
    pub max_stored_tasks: Option<u64>,
    pub max_stored_bytes: Option<u64>,
    /// Read by `serve` into the HTTP options (sessions live in the
    /// transport, not the gateway's limits).
    pub max_sessions: Option<usize>,
}

impl LimitsSection {
    /// The limits to enforce: these settings over the defaults.
    pub(crate) fn to_limits(&self) -> Result<agentgate_core::mcp::Limits> {
        let mut limits = agentgate_core::mcp::Limits::default();
        if let Some(n) = self.max_active_tasks {
            limits.max_active_tasks = n;
        }
        if let Some(rate) = self.requests_per_second {
            if !rate.is_finite() || rate < 0.0 {
                anyhow::bail!(
                    "limits.requests_per_second must be a number >= 0 (0 turns the limit off), \
                     got {rate}"
                );
            }
            limits.requests_per_second = rate;
        }
        if let Some(burst) = self.request_burst {
            if burst == 0 {
                anyhow::bail!("limits.request_burst must be at least 1, got 0");
            }
            limits.request_burst = burst;
        }
        if let Some(n) = self.max_principals {
            if n == 0 {
                anyhow::bail!("limits.max_principals must be at least 1, got 0");
            }
            limits.max_principals = n;
        }
        if let Some(n) = self.poll_burst {
            limits.poll_burst = n;
        }
        if let Some(n) = self.max_input_response_bytes {
            limits.max_input_response_bytes = n;
        }
        if let Some(secs) = self.max_ttl_seconds {
            limits.max_ttl = (secs > 0).then(|| std::time::Duration::from_secs(secs));
        }
        if let Some(bytes) = self.poll_cache_bytes {
            limits.poll_cache_bytes = bytes;
        }
        if let Some(n) = self.max_listens {
            limits.max_listens = n;
        }
        if let Some(n) = self.max_stored_tasks {
            limits.max_stored_tasks = n;
        }
        if let Some(bytes) = self.max_stored_bytes {
            limits.max_stored_bytes = bytes;
        }
        Ok(limits)
    }
}

impl FileConfig {
    pub(crate) fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading config file {}", path.display()))?;
        let config = Self::parse(&text)
            .with_context(|| format!("parsing config file {}", path.display()))?;
        crate::backends::check_all(&config.backends)
            .and_then(|()| config.limits.to_limits().map(drop))
            .and_then(|()| config.check_across_sections())
            .with_context(|| format!("checking config file {}", path.display()))?;
        Ok(config)
    }

    /// Settings of one table that need another's.
    fn check_across_sections(&self) -> Result<()> {
        let identity_aware = self
            .backends
            .get("qbusiness")
            .and_then(|q| q.get("identity_center"))
            .is_some();
        if identity_aware && self.auth.mode != agentgate_core::auth::AuthMode::Oauth {
            anyhow::bail!(
                "[qbusiness.identity_center] needs [auth] mode = \"oauth\": an identity-aware \
                 session is made from each principal's OAuth access token, which IAM Identity \
                 Center exchanges (see docs/backends/qbusiness.md)"
            );
        }
        Ok(())
    }

    /// Parses a config file's text: the backends' tables are set aside for
    /// them, every other table must be one of ours.
    pub(crate) fn parse(text: &str) -> Result<Self> {
        let mut table: toml::Table = toml::from_str(text)?;
        let mut backends = BTreeMap::new();
        for name in crate::backends::BACKENDS.iter().map(|b| b.name) {
            if let Some(section) = table.remove(name) {
                let value =
                    serde_json::to_value(section).with_context(|| format!("reading [{name}]"))?;
                backends.insert(name.to_owned(), value);
            }
        }
        let mut config: Self = toml::Value::Table(table).try_into().map_err(|e| {
            let names: Vec<_> = crate::backends::BACKENDS.iter().map(|b| b.name).collect();
            anyhow::anyhow!("{e}; the backends' sections are: {}", names.join(", "))
        })?;
        config.backends = backends;
        Ok(config)
    }
}

/// Where the store lives when neither `--store` nor the config names one:
/// `tasks.db` in the user's data directory (e.g. ~/.local/share/agentgate).
pub(crate) fn default_store_url() -> Result<(String, PathBuf)> {
    let path = default_data_file("tasks.db")?;
    Ok((format!("sqlite://{}", path.display()), path))
}

/// `name` in the user's data directory (e.g. ~/.local/share/agentgate).
pub(crate) fn default_data_file(name: &str) -> Result<PathBuf> {
    let dirs =
        directories::ProjectDirs::from("dev", "agentgate", "agentgate").with_context(|| {
            format!("no home directory to keep {name} in; name a path for it (see --help)")
        })?;
    Ok(dirs.data_dir().join(name))
}

/// `server.listen`, read as `--listen` is (`crate::serve::parse_listen`).
fn listen_address<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<SocketAddr>, D::Error> {
    let text = String::deserialize(deserializer)?;
    crate::serve::parse_listen(&text)
        .map(Some)
        .map_err(serde::de::Error::custom)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_keys_are_rejected_with_their_name() {
        let err =
            FileConfig::parse("[server]\nlisten_addr = \"x\"\n").expect_err("typo must be refused");
        assert!(err.to_string().contains("listen_addr"), "{err}");
    }

    #[test]
    fn full_file_parses() {
        let cfg = FileConfig::parse(
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
    fn store_durability_is_full_or_relaxed_and_nothing_else() {
        use agentgate_core::store::Durability;
        let cfg =
            FileConfig::parse("[server]\nstore_durability = \"relaxed\"\n").expect("valid config");
        assert_eq!(cfg.server.store_durability, Some(Durability::Relaxed));
        let cfg =
            FileConfig::parse("[server]\nstore_durability = \"full\"\n").expect("valid config");
        assert_eq!(cfg.server.store_durability, Some(Durability::Full));
        assert_eq!(
            FileConfig::parse("")
                .expect("empty")
                .server
                .store_durability,
            None
        );
        let err = FileConfig::parse("[server]\nstore_durability = \"normal\"\n")
            .expect_err("an unknown durability must be refused");
        assert!(
            format!("{err:#}").contains("store_durability"),
            "names the key: {err:#}"
        );
        let err = FileConfig::parse("[server]\nstore_durabilty = \"relaxed\"\n")
            .expect_err("a typo must be refused");
        assert!(err.to_string().contains("store_durabilty"), "{err}");
    }

    #[test]
    fn limits_section_overrides_defaults_and_refuses_typos() {
        let cfg = FileConfig::parse(
            "[limits]\nmax_active_tasks = 5\nrequests_per_second = 2.5\nmax_ttl_seconds = 0\n",
        )
        .expect("valid config");
        let limits = cfg.limits.to_limits().expect("valid limits");
        assert_eq!(limits.max_active_tasks, 5);
        assert_eq!(limits.requests_per_second, 2.5);
        assert_eq!(limits.max_ttl, None, "0 turns the TTL cap off");
        let defaults = agentgate_core::mcp::Limits::default();
        assert_eq!(
            limits.poll_burst, defaults.poll_burst,
            "unset keys keep defaults"
        );
        assert_eq!(
            (limits.max_stored_tasks, limits.max_stored_bytes),
            (10_000, 1 << 30),
            "the storage quotas are on by default"
        );
        let cfg = FileConfig::parse("[limits]\nmax_stored_tasks = 0\nmax_stored_bytes = 4096\n")
            .expect("valid config");
        let limits = cfg.limits.to_limits().expect("valid limits");
        assert_eq!(
            (limits.max_stored_tasks, limits.max_stored_bytes),
            (0, 4096)
        );
        let err = FileConfig::parse("[limits]\nmax_tasks = 5\n").expect_err("typo must be refused");
        assert!(err.to_string().contains("max_tasks"), "{err}");
        let cfg = FileConfig::parse("[limits]\nrequest_burst = 0\n").expect("parses");
        let err = cfg.limits.to_limits().expect_err("burst 0 refused");
        assert!(err.to_string().contains("limits.request_burst"), "{err}");
    }

    #[test]
    fn backend_sections_go_to_their_backends_which_refuse_typos() {
        let cfg =
            FileConfig::parse("[copilot]\nunassign_on_cancel = true\nmax_watch_minutes = 30\n")
                .expect("valid config");
        let copilot: backend_copilot::CopilotConfig =
            agentgate_backend::parse_section("copilot", cfg.backends.get("copilot").cloned())
                .expect("copilot section");
        assert!(copilot.unassign_on_cancel);
        assert_eq!(copilot.max_watch_minutes, 30);
        assert_eq!(copilot.poll_min_ms, 1000, "unset keys keep their defaults");
        crate::backends::check_all(&cfg.backends).expect("checks");
        let cfg = FileConfig::parse("[copilot]\nunassign = true\n").expect("set aside");
        let err = crate::backends::check_all(&cfg.backends).expect_err("typo must be refused");
        assert!(
            format!("{err:#}").contains("[copilot] unassign: unknown field `unassign`"),
            "{err:#}"
        );
        let cfg = FileConfig::parse("[copilot]\nmax_watch_minutes = 0\n").expect("set aside");
        let err = crate::backends::check_all(&cfg.backends).expect_err("range refused");
        assert!(format!("{err:#}").contains("max_watch_minutes"), "{err:#}");
        let cfg = FileConfig::parse("[qbusiness]\nregion = \"x\"\n").expect("set aside");
        let err = crate::backends::check_all(&cfg.backends).expect_err("no keys yet");
        assert!(format!("{err:#}").contains("[qbusiness] region"), "{err:#}");
        let cfg = FileConfig::parse(
            "[[a2a.agents]]\nname = \"travel\"\nurl = \"https://agents.example.com/travel\"\n",
        )
        .expect("set aside");
        crate::backends::check_all(&cfg.backends).expect("an A2A agent");
        let cfg = FileConfig::parse(
            "[[a2a.agents]]\nname = \"t\"\nurl = \"https://a.example\"\ntoken = \"x\"\n",
        )
        .expect("set aside");
        let err = crate::backends::check_all(&cfg.backends).expect_err("secrets stay out of files");
        assert!(
            format!("{err:#}").contains("[a2a] agents[0].token"),
            "{err:#}"
        );
        let err = FileConfig::parse("[copilott]\n").expect_err("unknown section");
        let text = format!("{err:#}");
        assert!(
            text.contains("copilott") && text.contains("qbusiness, copilot"),
            "{text}"
        );
    }

    #[test]
    fn auth_section_parses_and_refuses_typos() {
        use agentgate_core::auth::AuthMode;
        let cfg = FileConfig::parse(
            "[auth]\nmode = \"tokens\"\nresource = \"https://mcp.example.com/mcp\"\n\
             [[auth.tokens]]\nprincipal = \"alice\"\nsha256 = \"00\"\n\
             [[auth.tokens]]\nprincipal = \"ci\"\ntoken_env = \"CI_TOKEN\"\n",
        )
        .expect("valid config");
        assert_eq!(cfg.auth.mode, AuthMode::Tokens);
        assert_eq!(cfg.auth.tokens.len(), 2);
        assert_eq!(cfg.auth.tokens[1].token_env.as_deref(), Some("CI_TOKEN"));
        let cfg = FileConfig::parse(
            "[auth]\nmode = \"oauth\"\n[auth.oauth]\nissuer = \"https://a.example\"\n",
        )
        .expect("valid config");
        let oauth = cfg.auth.oauth.expect("oauth section");
        assert_eq!(oauth.algorithms, ["RS256", "ES256"]);
        for typo in [
            "[auth]\nmodes = \"tokens\"\n",
            "[auth]\nmode = \"token\"\n",
            "[[auth.tokens]]\nprincipal = \"a\"\nhash = \"00\"\n",
            "[auth.oauth]\nissuer = \"https://a.example\"\naud = \"x\"\n",
        ] {
            FileConfig::parse(typo).expect_err(typo);
        }
    }
}
