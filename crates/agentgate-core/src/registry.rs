//! The tools a gateway serves, in a fixed order (`tools/list` is deterministic).

use std::collections::BTreeMap;

use crate::job::ToolSpec;

/// Tools by name.
#[derive(Debug, Clone, Default)]
pub struct ToolRegistry {
    tools: BTreeMap<String, ToolSpec>,
}

impl ToolRegistry {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a tool; a later tool of the same name replaces the earlier one.
    pub fn with(mut self, spec: ToolSpec) -> Self {
        self.tools.insert(spec.tool.name.to_string(), spec);
        self
    }

    pub fn get(&self, name: &str) -> Option<&ToolSpec> {
        self.tools.get(name)
    }

    pub fn iter(&self) -> impl Iterator<Item = &ToolSpec> {
        self.tools.values()
    }
}
