//! OAuth scopes (`mode = "oauth"`): which scopes a request to `/mcp` needs,
//! and whether a token's grant covers them.
//!
//! Three settings of `[auth.oauth]`, all empty by default (no scope checks):
//!
//! - `required_scopes`: every request (and `/metrics`) needs all of them;
//!   checked with the token, before the body is read.
//! - `method_scopes`: JSON-RPC method → scopes, e.g. `"tasks/cancel"`.
//! - `tool_scopes`: tool name → scopes, for `tools/call` of that tool.
//!
//! The last two need the body (method, `params.name`), so the transport's
//! body reader asks [`ScopePolicy::needed`] once it has parsed the message.
//! A request lacking a scope gets 403 with `WWW-Authenticate: Bearer
//! error="insufficient_scope", scope="…"` naming every scope the request
//! needs (RFC 6750 §3.1; MCP 2025-11-25, "Scope Challenge Handling"): the
//! client asks the authorization server for them and retries.

use std::collections::{BTreeMap, BTreeSet};

use super::AuthError;

/// The configured scope requirements.
#[derive(Debug, Clone, Default)]
pub struct ScopePolicy {
    required: Vec<String>,
    methods: BTreeMap<String, Vec<String>>,
    tools: BTreeMap<String, Vec<String>>,
}

/// One JSON-RPC message's method and, for `tools/call`, the tool's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Call<'a> {
    pub method: &'a str,
    pub tool: Option<&'a str>,
}

impl<'a> Call<'a> {
    /// The calls in a parsed body: one for a message object, one per
    /// element of a batch. Messages without a method (responses) need
    /// nothing and are left out.
    pub fn all_in(body: &'a serde_json::Value) -> Vec<Call<'a>> {
        let one = |message: &'a serde_json::Value| {
            let method = message.get("method")?.as_str()?;
            let tool = (method == "tools/call")
                .then(|| message.get("params")?.get("name")?.as_str())
                .flatten();
            Some(Call { method, tool })
        };
        match body {
            serde_json::Value::Array(messages) => messages.iter().filter_map(one).collect(),
            message => one(message).into_iter().collect(),
        }
    }
}

impl ScopePolicy {
    /// Reads and checks the three settings: each scope must be a non-empty
    /// RFC 6749 scope token (it goes into a quoted header parameter).
    pub fn new(
        required: &[String],
        methods: &BTreeMap<String, Vec<String>>,
        tools: &BTreeMap<String, Vec<String>>,
    ) -> Result<Self, AuthError> {
        check_tokens("auth.oauth.required_scopes", required)?;
        for (method, scopes) in methods {
            check_tokens(&format!("auth.oauth.method_scopes.{method:?}"), scopes)?;
        }
        for (tool, scopes) in tools {
            check_tokens(&format!("auth.oauth.tool_scopes.{tool:?}"), scopes)?;
        }
        Ok(Self {
            required: required.to_vec(),
            methods: methods.clone(),
            tools: tools.clone(),
        })
    }

    /// The scopes every request needs.
    pub fn required(&self) -> &[String] {
        &self.required
    }

    /// True when some method or tool has its own scopes, so the body must
    /// be looked at.
    pub fn has_call_rules(&self) -> bool {
        !self.methods.is_empty() || !self.tools.is_empty()
    }

    /// Every scope `calls` need: the required ones, each method's and each
    /// called tool's.
    pub fn needed<'s>(&'s self, calls: &[Call<'_>]) -> BTreeSet<&'s str> {
        let mut needed: BTreeSet<&str> = self.required.iter().map(String::as_str).collect();
        for call in calls {
            if let Some(scopes) = self.methods.get(call.method) {
                needed.extend(scopes.iter().map(String::as_str));
            }
            if let Some(scopes) = call.tool.and_then(|tool| self.tools.get(tool)) {
                needed.extend(scopes.iter().map(String::as_str));
            }
        }
        needed
    }
}

/// True when `granted` holds every scope in `needed` (scopes compare
/// exactly: RFC 6749 §3.3 makes them case-sensitive).
pub fn covers<'n>(granted: &[String], needed: impl IntoIterator<Item = &'n str>) -> bool {
    needed
        .into_iter()
        .all(|scope| granted.iter().any(|g| g == scope))
}

/// RFC 6749 §3.3: `scope-token = 1*( %x21 / %x23-5B / %x5D-7E )`.
fn check_tokens(setting: &str, scopes: &[String]) -> Result<(), AuthError> {
    for scope in scopes {
        let valid = !scope.is_empty()
            && scope
                .bytes()
                .all(|b| b == 0x21 || (0x23..=0x5b).contains(&b) || (0x5d..=0x7e).contains(&b));
        if !valid {
            return Err(AuthError::Config(format!(
                "{setting}: {scope:?} is not a scope (one word of printable ASCII without \
                 spaces, quotes or backslashes, e.g. \"mcp:tools\")"
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn policy() -> ScopePolicy {
        ScopePolicy::new(
            &["mcp".into()],
            &BTreeMap::from([("tasks/cancel".into(), vec!["mcp:write".into()])]),
            &BTreeMap::from([("Deploy".into(), vec!["deploy".into(), "mcp:write".into()])]),
        )
        .expect("valid")
    }

    #[test]
    fn a_request_needs_the_required_the_methods_and_the_tools_scopes() {
        let policy = policy();
        let get = Call {
            method: "tasks/get",
            tool: None,
        };
        assert_eq!(policy.needed(&[get]), BTreeSet::from(["mcp"]));
        let body = json!({"method": "tools/call", "params": {"name": "Deploy"}});
        assert_eq!(
            policy.needed(&Call::all_in(&body)),
            BTreeSet::from(["deploy", "mcp", "mcp:write"])
        );
        // A batch needs what each of its messages needs; responses need nothing.
        let batch = json!([
            {"method": "tasks/cancel", "params": {}},
            {"method": "tools/call", "params": {"name": "Other"}},
            {"result": {}, "id": 3}
        ]);
        assert_eq!(Call::all_in(&batch).len(), 2);
        assert_eq!(
            policy.needed(&Call::all_in(&batch)),
            BTreeSet::from(["mcp", "mcp:write"])
        );
        // The tool's name counts only in tools/call.
        let not_a_call = json!({"method": "prompts/get", "params": {"name": "Deploy"}});
        assert_eq!(
            policy.needed(&Call::all_in(&not_a_call)),
            BTreeSet::from(["mcp"])
        );
    }

    #[test]
    fn covers_compares_scopes_exactly() {
        let granted = vec!["mcp".to_owned(), "deploy".to_owned()];
        assert!(covers(&granted, ["mcp", "deploy"]));
        assert!(!covers(&granted, ["mcp", "MCP:write"]));
        assert!(!covers(&granted, ["Deploy"]));
        assert!(covers(&[], []));
    }

    #[test]
    fn a_scope_with_a_space_or_a_quote_is_refused_naming_the_setting() {
        for bad in ["two words", "", "quo\"te"] {
            let err = ScopePolicy::new(
                &[],
                &BTreeMap::new(),
                &BTreeMap::from([("Deploy".into(), vec![bad.into()])]),
            )
            .expect_err(bad);
            assert!(err.to_string().contains("auth.oauth.tool_scopes"), "{err}");
        }
    }
}
