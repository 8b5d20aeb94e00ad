//! The backends this build serves: one line each in [`BACKENDS`]. Each reads
//! its own table of the config file (`[copilot]`, `[qbusiness]`, `[a2a]`,
//! `[countdown]`) and refuses
//! an unknown key by name.
//!
//! To add a backend: write a crate on `agentgate-backend` whose backend
//! implements `ConfiguredBackend`, depend on it here, and add its line.

use std::collections::BTreeMap;

use agentgate_backend::{BoxFuture, ConfiguredBackend, parse_section};
use agentgate_core::runtime::RuntimeBuilder;
use anyhow::{Context as _, Result};

/// Every backend of this build.
pub(crate) const BACKENDS: &[Entry] = &[
    entry::<backend_qbusiness::QBusinessQuery>(),
    entry::<backend_copilot::Copilot>(),
    entry::<backend_a2a::A2aBackend>(),
    entry::<agentgate_example_countdown::Countdown>(),
];

/// One backend of the list: its section name, and how to check and add it.
pub(crate) struct Entry {
    pub name: &'static str,
    check: fn(Option<serde_json::Value>) -> Result<()>,
    add:
        fn(RuntimeBuilder, Option<serde_json::Value>) -> BoxFuture<'static, Result<RuntimeBuilder>>,
}

const fn entry<B: ConfiguredBackend>() -> Entry {
    Entry {
        name: B::NAME,
        check: check::<B>,
        add: add::<B>,
    }
}

/// Adds every backend of this build to `builder`, each with its section of
/// `sections` (a missing section is an empty one).
pub(crate) async fn add_all(
    mut builder: RuntimeBuilder,
    sections: &BTreeMap<String, serde_json::Value>,
) -> Result<RuntimeBuilder> {
    for backend in BACKENDS {
        builder = (backend.add)(builder, sections.get(backend.name).cloned()).await?;
    }
    Ok(builder)
}

/// Checks every backend's section without starting anything.
pub(crate) fn check_all(sections: &BTreeMap<String, serde_json::Value>) -> Result<()> {
    for backend in BACKENDS {
        (backend.check)(sections.get(backend.name).cloned())?;
    }
    Ok(())
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
