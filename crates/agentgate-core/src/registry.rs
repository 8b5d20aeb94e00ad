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
}
