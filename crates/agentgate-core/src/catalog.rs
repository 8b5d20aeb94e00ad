//! What the served tools are made from, kept for as long as the runtime
//! runs, so that they can be made again when a backend's tools change (an
//! MCP server announced `notifications/tools/list_changed`, or came up
//! after the gateway did).
//!
//! ```text
//! RuntimeBuilder ─▶ ToolCatalog { backends, tools added by hand, selection, read-only }
//!   start:              registry(Strict)  ─▶ a name served twice or a selection
//!                                             that matches nothing is refused
//!   Nudge::tools_changed: registry(Lenient) ─▶ Engine::replace_tools ─▶ clients told
//!                                             (a clash keeps the tool offered first)
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;

use agentgate_backend::{Backend, Health, ToolSpec};

use crate::registry::ToolRegistry;
use crate::runtime::RuntimeError;

/// How [`ToolCatalog::registry`] treats what it cannot serve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Build {
    /// At start: a clash or a selection that matches nothing is an error
    /// the operator fixes before serving.
    Strict,
    /// While serving: a clash keeps the tool offered first, in backend
    /// order (a backend offers its own tools in the order it first served
    /// them; the MCP backend does), and is logged; a selected name that
    /// matches nothing now matches nothing.
    Lenient,
}

/// The backends and settings the tool registry is made from.
pub(crate) struct ToolCatalog {
    pub(crate) backends: Vec<(&'static str, Arc<dyn Backend>)>,
    pub(crate) by_hand: Vec<ToolSpec>,
    pub(crate) selection: Option<Vec<String>>,
    pub(crate) read_only: bool,
}

impl std::fmt::Debug for ToolCatalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolCatalog")
            .field(
                "backends",
                &self.backends.iter().map(|(n, _)| n).collect::<Vec<_>>(),
            )
            .field("selection", &self.selection)
            .field("read_only", &self.read_only)
            .finish_non_exhaustive()
    }
}

/// A tool offered: where from (for the clash error), and whether
/// `tools/list` shows it.
struct Served {
    origin: String,
    backend: Option<&'static str>,
    spec: ToolSpec,
    listed: bool,
}

impl ToolCatalog {
    /// The tools every backend serves now (the tools of a backend whose
    /// [`Backend::setup`] is not ready are served but not listed), and the
    /// tools added by hand.
    fn offered(&self) -> Vec<Served> {
        let mut offered = Vec::new();
        for (name, backend) in &self.backends {
            let listed = matches!(backend.setup(), Health::Ready(_));
            for spec in backend.tools() {
                offered.push(Served {
                    origin: format!("backend `{name}`"),
                    backend: Some(name),
                    spec,
                    listed,
                });
            }
        }
        offered.extend(self.by_hand.iter().map(|spec| Served {
            origin: "a tool added by hand".to_owned(),
            backend: None,
            spec: spec.clone(),
            listed: true,
        }));
        offered
    }

    /// The registry of the tools served now: the selection, then read-only,
    /// applied to what is offered.
    pub(crate) fn registry(&self, build: Build) -> Result<ToolRegistry, RuntimeError> {
        let mut tools = self.offered();
        if let Some(names) = &self.selection {
            if build == Build::Strict {
                self.check_selection(&tools, names)?;
            }
            tools.retain(|served| names.iter().any(|name| selects(served, name)));
        }
        if self.read_only {
            let (kept, left): (Vec<Served>, Vec<Served>) = tools.into_iter().partition(|served| {
                served
                    .spec
                    .tool
                    .annotations
                    .as_ref()
                    .and_then(|a| a.read_only_hint)
                    == Some(true)
            });
            if !left.is_empty() && build == Build::Strict {
                let names: Vec<&str> = left.iter().map(|s| &*s.spec.tool.name).collect();
                tracing::info!(
                    tools = %names.join(", "),
                    "read-only: not serving the tools not marked readOnlyHint"
                );
            }
            tools = kept;
        }
        let mut registry = ToolRegistry::new();
        let mut served_by: BTreeMap<String, String> = BTreeMap::new();
        for Served {
            origin,
            spec,
            listed,
            ..
        } in tools
        {
            let name = spec.tool.name.to_string();
            if let Some(first) = served_by.get(&name) {
                if build == Build::Strict {
                    return Err(RuntimeError::DuplicateTool {
                        tool: name,
                        first: first.clone(),
                        second: origin,
                    });
                }
                tracing::warn!(
                    tool = %name,
                    served_by = %first,
                    not_served_for = %origin,
                    "a tool of this name is served already; rename one of them"
                );
                continue;
            }
            served_by.insert(name, origin);
            registry = if listed {
                registry.with(spec)
            } else {
                registry.with_unlisted(spec)
            };
        }
        let pending = self
            .backends
            .iter()
            .any(|(_, backend)| backend.tools_pending());
        Ok(registry.with_pending(pending))
    }
}

/// Whether `name` (a tool or a backend) selects `served`.
fn selects(served: &Served, name: &str) -> bool {
    name == &*served.spec.tool.name || served.backend == Some(name)
}

impl ToolCatalog {
    /// Refuses a selected name that matches nothing offered, nor a backend;
    /// while a backend's tools may be missing yet, says so instead (the
    /// name may be one of them).
    fn check_selection(&self, tools: &[Served], names: &[String]) -> Result<(), RuntimeError> {
        let pending = self.backends.iter().any(|(_, b)| b.tools_pending());
        for name in names {
            let matched = tools.iter().any(|served| selects(served, name))
                || self.backends.iter().any(|(backend, _)| backend == name);
            if matched {
                continue;
            }
            if pending {
                tracing::warn!(
                    name = %name,
                    "the tool selection names a tool no backend serves yet; it is served if a \
                     backend lists it later"
                );
                continue;
            }
            return Err(unknown_selection(tools, name));
        }
        Ok(())
    }
}

/// The error for a selected `name` that matches nothing.
fn unknown_selection(tools: &[Served], name: &str) -> RuntimeError {
    let mut backends: Vec<&str> = tools.iter().filter_map(|t| t.backend).collect();
    backends.dedup();
    RuntimeError::UnknownSelection {
        name: name.to_owned(),
        tools: tools
            .iter()
            .map(|t| &*t.spec.tool.name)
            .collect::<Vec<_>>()
            .join(", "),
        backends: backends.join(", "),
    }
}
