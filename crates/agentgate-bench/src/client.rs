//! The load client: raw 2026-07-28 Streamable HTTP requests over reqwest.
//!
//! Raw JSON rather than rmcp's client so that every server, the bare echo
//! included, is driven by exactly the same code: one keep-alive connection
//! per concurrent worker, the same headers, the same body, and the response
//! parsed as JSON (or the JSON-RPC message out of an SSE stream) every time.

use std::time::Duration;

use anyhow::{Context as _, bail};
use serde_json::{Value, json};

use crate::serve::TOOL;

/// One worker's connection to one server.
#[derive(Debug, Clone)]
pub(crate) struct McpClient {
    http: reqwest::Client,
    url: String,
    /// `Authorization` header value, for servers that check tokens.
    bearer: Option<String>,
}

/// The `_meta` every modern request carries: the version and the tasks
/// extension, so `tools/call` answers with a `CreateTaskResult`.
fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {
            "extensions": { "io.modelcontextprotocol/tasks": {} }
        }
    })
}

impl McpClient {
    /// A client for `base` (`http://ADDR`), posting to `base/mcp`, sending
    /// `token` as a bearer token if given.
    pub(crate) fn new(base: &str, token: Option<&str>) -> anyhow::Result<Self> {
        let http = reqwest::Client::builder()
            .pool_max_idle_per_host(1)
            .tcp_nodelay(true)
            .timeout(Duration::from_secs(60))
            .build()
            .context("building the HTTP client")?;
        Ok(Self {
            http,
            url: format!("{base}/mcp"),
            bearer: token.map(|t| format!("Bearer {t}")),
        })
    }

    /// Posts one JSON-RPC request and returns its `result`.
    async fn call(&self, method: &str, name: &str, params: Value) -> anyhow::Result<Value> {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let mut request = self.http.post(&self.url);
        if let Some(bearer) = &self.bearer {
            request = request.header("authorization", bearer);
        }
        let response = request
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", method)
            .header("mcp-name", name)
            .body(serde_json::to_vec(&body)?)
            .send()
            .await
            .with_context(|| format!("{method}: sending"))?;
        let status = response.status();
        let text = response
            .text()
            .await
            .with_context(|| format!("{method}: reading the body"))?;
        let message = parse_message(&text)
            .with_context(|| format!("{method}: HTTP {status}, unreadable body: {text:.300}"))?;
        if let Some(error) = message.get("error") {
            bail!("{method}: HTTP {status}, JSON-RPC error {error}");
        }
        match message.get("result") {
            Some(result) => Ok(result.clone()),
            // The echo sends the request back: its `params` stand in.
            None => message
                .get("params")
                .cloned()
                .with_context(|| format!("{method}: no result in {text:.300}")),
        }
    }

    /// `tools/call` of the bench tool; returns the new task's id.
    pub(crate) async fn create(&self, ms: u64) -> anyhow::Result<String> {
        let params = json!({"name": TOOL, "arguments": {"ms": ms}, "_meta": meta()});
        let result = self.call("tools/call", TOOL, params).await?;
        if result.get("resultType").and_then(Value::as_str) != Some("task") {
            bail!(
                "tools/call did not return a CreateTaskResult: {}",
                short(&result)
            );
        }
        result
            .get("taskId")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .context("CreateTaskResult without taskId")
    }

    /// `tasks/get`; returns the task's status.
    pub(crate) async fn get(&self, id: &str) -> anyhow::Result<String> {
        let params = json!({"taskId": id, "_meta": meta()});
        let result = self.call("tasks/get", id, params).await?;
        result
            .get("status")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .with_context(|| format!("tasks/get without status: {}", short(&result)))
    }

    /// A `tasks/get`-shaped request to the echo; the body comes back.
    pub(crate) async fn echo(&self, id: &str) -> anyhow::Result<()> {
        let params = json!({"taskId": id, "_meta": meta()});
        let back = self.call("tasks/get", id, params).await?;
        if back.get("taskId").and_then(Value::as_str) != Some(id) {
            bail!("the echo did not send the request back: {}", short(&back));
        }
        Ok(())
    }
}

/// A value for an error message, cut to a readable length.
fn short(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(300) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text,
    }
}

/// The JSON-RPC message in a body: plain JSON, or the `data:` of the SSE
/// event that carries a response.
fn parse_message(text: &str) -> anyhow::Result<Value> {
    let trimmed = text.trim_start();
    if trimmed.starts_with('{') {
        return Ok(serde_json::from_str(trimmed)?);
    }
    for line in text.lines() {
        let Some(data) = line.strip_prefix("data:") else {
            continue;
        };
        let data = data.trim();
        if data.is_empty() {
            continue;
        }
        let message: Value = serde_json::from_str(data)?;
        if message.get("result").is_some() || message.get("error").is_some() {
            return Ok(message);
        }
    }
    bail!("no JSON-RPC response in the body")
}

#[cfg(test)]
mod tests {
    use super::parse_message;
    use serde_json::json;

    #[test]
    fn reads_plain_json_and_the_response_event_of_an_sse_stream() {
        let plain = parse_message(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#).expect("json");
        assert_eq!(plain["result"], json!({}));
        let sse = "id: 0\ndata:\n\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"status\":\"working\"}}\n\n";
        assert_eq!(
            parse_message(sse).expect("sse")["result"]["status"],
            "working"
        );
        assert!(parse_message("garbage").is_err());
    }
}
