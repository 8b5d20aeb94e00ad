//! The tools a gateway serves, in a fixed order (`tools/list` is deterministic).
//! A tool of a backend that is not set up is served but not listed: its
//! tasks can still be followed, and a call by name gets its own error.

use std::collections::{BTreeMap, BTreeSet};

use agentgate_backend::ToolSpec;

/// Tools by name.
#[derive(Debug, Clone, Default)]
pub struct ToolRegistry {
    tools: BTreeMap<String, ToolSpec>,
    unlisted: BTreeSet<String>,
    /// Some backend's tools may be missing yet ([`Backend::tools_pending`]).
    ///
    /// [`Backend::tools_pending`]: agentgate_backend::Backend::tools_pending
    pending: bool,
}

impl ToolRegistry {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a tool, its schemas in their portable spelling
    /// ([`crate::schema`]); a later tool of the same name replaces the
    /// earlier one.
    pub fn with(mut self, spec: ToolSpec) -> Self {
        let tool = crate::schema::portable_tool(spec.tool.clone());
        let spec = spec.with_tool(tool);
        self.tools.insert(spec.tool.name.to_string(), spec);
        self
    }

    /// Adds a tool that `tools/list` leaves out (see the module docs).
    pub fn with_unlisted(mut self, spec: ToolSpec) -> Self {
        self.unlisted.insert(spec.tool.name.to_string());
        self.with(spec)
    }

    /// Marks that some backend's tools may be missing yet: a task of a tool
    /// not served waits for it instead of failing.
    pub fn with_pending(mut self, pending: bool) -> Self {
        self.pending = pending;
        self
    }

    /// Whether some backend's tools may be missing yet.
    pub fn pending(&self) -> bool {
        self.pending
    }

    /// The tools `tools/list` shows.
    pub fn listed(&self) -> impl Iterator<Item = &ToolSpec> {
        self.tools
            .values()
            .filter(|spec| !self.unlisted.contains(&*spec.tool.name))
    }

    pub fn get(&self, name: &str) -> Option<&ToolSpec> {
        self.tools.get(name)
    }

    pub fn iter(&self) -> impl Iterator<Item = &ToolSpec> {
        self.tools.values()
    }

    /// Whether `other` serves the same tools, with the same definitions and
    /// the same listing (what a client of `tools/list` would see change).
    pub fn same_tools(&self, other: &ToolRegistry) -> bool {
        self.unlisted == other.unlisted
            && self.pending == other.pending
            && self.tools.len() == other.tools.len()
            && self
                .tools
                .iter()
                .zip(&other.tools)
                .all(|((a, spec_a), (b, spec_b))| a == b && spec_a.tool == spec_b.tool)
    }
}
