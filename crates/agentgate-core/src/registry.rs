//! The tools a gateway serves, in a fixed order (`tools/list` is deterministic).
//! A tool of a backend that is not set up is served but not listed: its
//! tasks can still be followed, and a call by name gets its own error.

use std::collections::{BTreeMap, BTreeSet};

use agentgate_backend::ToolSpec;

/// The most names of removed tools a registry keeps.
const MAX_REMOVED: usize = 10_000;

/// Tools by name.
#[derive(Debug, Clone, Default)]
pub struct ToolRegistry {
    tools: BTreeMap<String, ToolSpec>,
    unlisted: BTreeSet<String>,
    /// Some backend's tools may be missing yet ([`Backend::tools_pending`]).
    ///
    /// [`Backend::tools_pending`]: agentgate_backend::Backend::tools_pending
    pending: bool,
    /// Tools this process served before and no longer does (a server
    /// stopped listing them): a task of one waits for it, as for a pending
    /// tool, since a server restarting or listing its tools one by one
    /// drops them only for a while.
    removed: BTreeSet<String>,
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

    /// Whether a task of `tool`, which is not served, should wait for it:
    /// some backend's tools may be missing yet, or this process served the
    /// tool before.
    pub fn may_come_back(&self, tool: &str) -> bool {
        self.pending || self.removed.contains(tool)
    }

    /// Carries over what `before` served that this registry does not, as
    /// removed (with what `before` had removed and this one does not
    /// serve).
    pub(crate) fn after(mut self, before: &ToolRegistry) -> Self {
        let gone = before
            .tools
            .keys()
            .chain(&before.removed)
            .filter(|name| !self.tools.contains_key(*name))
            .cloned();
        let gone: Vec<String> = gone.collect();
        // A server may list new names every time: only so many are kept.
        let room = MAX_REMOVED.saturating_sub(self.removed.len());
        self.removed.extend(gone.into_iter().take(room));
        self
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
            && self.tools.len() == other.tools.len()
            && self
                .tools
                .iter()
                .zip(&other.tools)
                .all(|((a, spec_a), (b, spec_b))| a == b && spec_a.tool == spec_b.tool)
    }
}
