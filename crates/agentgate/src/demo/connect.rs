//! What the demo prints once the walkthrough is done: how to point other
//! MCP clients at the running gateway, over HTTP or as a stdio process on
//! the same store and emulators.

use std::path::Path;

use anyhow::{Context as _, Result};
use serde_json::json;

use super::Emulators;

/// Prints the URL, a stdio command, and ready-to-paste client settings.
pub(crate) fn print(
    url: &str,
    store_url: &str,
    config: &Path,
    emulators: &Emulators,
) -> Result<()> {
    let exe = std::env::current_exe().context("finding this program's path")?;
    let exe = exe.display().to_string();
    let config = config.display().to_string();
    // A stdio server is a second process: it shares the task store (SQLite
    // in WAL mode takes both), the gateway's config and the emulators.
    let env: serde_json::Map<String, serde_json::Value> = emulators
        .env()
        .into_iter()
        .map(|(name, value)| (name.to_owned(), value.into()))
        .collect();
    let args = [
        "--config", &config, "serve", "--stdio", "--store", store_url,
    ];
    let env_line: Vec<String> = env
        .iter()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
        .collect();
    let claude = json!({ "mcpServers": { "agentgate-demo": {
        "command": exe, "args": args, "env": env,
    }}});
    let vscode = json!({ "servers": { "agentgate-demo": { "type": "http", "url": url } } });
    let pretty = |v: &serde_json::Value| serde_json::to_string_pretty(v).unwrap_or_default();

    println!();
    println!(
        "{}",
        console::style("The gateway keeps serving. Connect a client:").bold()
    );
    println!("  Streamable HTTP: {url}");
    println!(
        "  agentgate call:  {exe} call --url {url} QBusinessQueryTool --arg query=\"Where is the Berlin office?\""
    );
    println!(
        "  stdio command:   {} {exe} {}",
        env_line.join(" "),
        args.join(" ")
    );
    println!(
        "  config:          {config} (the gateway's: its A2A agent `{}` and MCP server `{}`)",
        super::A2A_AGENT,
        super::MCP_SERVER
    );
    println!();
    println!("Claude Desktop (claude_desktop_config.json):");
    println!("{}", pretty(&claude));
    println!();
    println!("VS Code (.vscode/mcp.json):");
    println!("{}", pretty(&vscode));
    println!();
    println!("MCP Inspector:");
    println!("  npx @modelcontextprotocol/inspector   then connect to {url} (Streamable HTTP)");
    println!();
    println!(
        "The emulator credentials above are fixed test values, not secrets. Ctrl-C stops the demo."
    );
    Ok(())
}
