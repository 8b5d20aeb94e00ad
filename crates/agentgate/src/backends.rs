//! The backends this build serves: one line each in [`BACKENDS`]. Each reads
//! its own table of the config file (`[copilot]`, `[qbusiness]`, `[a2a]`,
//! `[mcp]`, and `[countdown]` in a build with the `example-countdown`
//! feature) and refuses an unknown key by name. Every table also takes
//! `enabled = true|false`, read here and removed before the backend sees
//! its table; a backend that is off is not built at all.
//!
//! To add a backend: write a crate on `agentgate-backend` whose backend
//! implements `ConfiguredBackend`, depend on it here, and add its line.

use std::collections::BTreeMap;

use agentgate_backend::{BoxFuture, ConfiguredBackend, Health, parse_section};
use agentgate_core::runtime::{Runtime, RuntimeBuilder};
use anyhow::{Context as _, Result};

/// Every backend of this build.
pub(crate) const BACKENDS: &[Entry] = &[
    entry::<backend_qbusiness::QBusinessQuery>(),
    entry::<backend_copilot::Copilot>(),
    entry::<backend_a2a::A2aBackend>(),
    entry::<backend_mcp::McpBackend>(),
    #[cfg(feature = "example-countdown")]
    entry::<agentgate_example_countdown::Countdown>(),
];

/// One backend of the list: its section name, and how to check and add it.
pub(crate) struct Entry {
    pub name: &'static str,
    enabled_by_default: bool,
    check: fn(Option<serde_json::Value>) -> Result<()>,
    add:
        fn(RuntimeBuilder, Option<serde_json::Value>) -> BoxFuture<'static, Result<RuntimeBuilder>>,
}

const fn entry<B: ConfiguredBackend>() -> Entry {
    Entry {
        name: B::NAME,
        enabled_by_default: B::ENABLED_BY_DEFAULT,
        check: check::<B>,
        add: add::<B>,
    }
}

/// Adds every backend of this build to `builder`, each with its section of
/// `sections` (a missing section is an empty one), serving only the tools
/// `selection` names when there is one (`--tools`, `server.tools`).
pub(crate) async fn add_all(
    mut builder: RuntimeBuilder,
    sections: &BTreeMap<String, serde_json::Value>,
    selection: Option<Vec<String>>,
) -> Result<RuntimeBuilder> {
    if let Some(names) = selection {
        builder = builder.select_tools(names);
    }
    for backend in BACKENDS {
        let (enabled, section) = backend.split(sections)?;
        if enabled {
            builder = (backend.add)(builder, section).await?;
        }
    }
    Ok(builder)
}

/// Checks every backend's section without starting anything (a backend
/// that is off included: turning it on must not reveal a typo).
pub(crate) fn check_all(sections: &BTreeMap<String, serde_json::Value>) -> Result<()> {
    for backend in BACKENDS {
        let (_, section) = backend.split(sections)?;
        (backend.check)(section)?;
    }
    Ok(())
}

/// The backends the config file turns off, in list order, each with why
/// (its `enabled = false`, or an example backend's default).
pub(crate) fn off(
    sections: &BTreeMap<String, serde_json::Value>,
) -> Result<Vec<(&'static str, String)>> {
    let mut off = Vec::new();
    for backend in BACKENDS {
        if !backend.split(sections)?.0 {
            let why = if backend.enabled_by_default {
                format!("off: [{}] enabled = false", backend.name)
            } else {
                format!("off unless [{}] enabled = true", backend.name)
            };
            off.push((backend.name, why));
        }
    }
    Ok(off)
}

/// Says once, at start, what each backend of `runtime` can do (its
/// [`agentgate_backend::Backend::setup`]) and which ones `sections` turn
/// off, so an operator sees a missing token before a user does.
pub(crate) fn log_setup(
    runtime: &Runtime,
    sections: &BTreeMap<String, serde_json::Value>,
) -> Result<()> {
    for (name, backend) in runtime.backends() {
        match backend.setup() {
            Health::Ready(summary) if summary.is_empty() => {
                tracing::info!(backend = name, "backend ready");
            }
            Health::Ready(summary) => {
                tracing::info!(backend = name, "backend ready: {summary}");
            }
            Health::NotConfigured(why) | Health::Broken(why) => tracing::warn!(
                backend = name,
                "backend not set up, its tools are not listed: {why}"
            ),
            other => tracing::warn!(backend = name, "backend: {other:?}"),
        }
    }
    for (name, why) in off(sections)? {
        tracing::info!(backend = name, "backend {why}");
    }
    Ok(())
}

/// The backends of `runtime` whose tools are not listed, each with why.
pub(crate) fn not_set_up(runtime: &Runtime) -> Vec<(String, String)> {
    runtime
        .backends()
        .iter()
        .filter_map(|(name, backend)| match backend.setup() {
            Health::Ready(_) => None,
            Health::NotConfigured(why) | Health::Broken(why) => Some(((*name).to_owned(), why)),
            other => Some(((*name).to_owned(), format!("{other:?}"))),
        })
        .collect()
}

impl Entry {
    /// Whether it is on, and its table with `enabled` taken out.
    fn split(
        &self,
        sections: &BTreeMap<String, serde_json::Value>,
    ) -> Result<(bool, Option<serde_json::Value>)> {
        let Some(mut section) = sections.get(self.name).cloned() else {
            return Ok((self.enabled_by_default, None));
        };
        let enabled = match section.as_object_mut().and_then(|t| t.remove("enabled")) {
            None => self.enabled_by_default,
            Some(serde_json::Value::Bool(enabled)) => enabled,
            Some(other) => anyhow::bail!(
                "[{}] enabled: expected true or false, found {other}",
                self.name
            ),
        };
        Ok((enabled, Some(section)))
    }
}

fn parse<B: ConfiguredBackend>(section: Option<serde_json::Value>) -> Result<B::Config> {
    let config = parse_section::<B::Config>(B::NAME, section)?;
    B::check_config(&config)
        .map_err(|e| anyhow::anyhow!(e))
        .with_context(|| format!("checking [{}]", B::NAME))?;
    Ok(config)
}

fn check<B: ConfiguredBackend>(section: Option<serde_json::Value>) -> Result<()> {
    parse::<B>(section).map(drop)
}

fn add<B: ConfiguredBackend>(
    builder: RuntimeBuilder,
    section: Option<serde_json::Value>,
) -> BoxFuture<'static, Result<RuntimeBuilder>> {
    Box::pin(async move {
        let config = parse::<B>(section)?;
        let upstream = builder.upstream_metrics(B::METRICS_LABEL);
        let backend = B::from_config(config, upstream)
            .await
            .map_err(|e| anyhow::anyhow!(e))
            .with_context(|| format!("starting the `{}` backend", B::NAME))?;
        Ok(builder.backend(backend))
    })
}
