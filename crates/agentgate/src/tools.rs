//! `agentgate tools`: the tools `agentgate serve` would serve with this
//! config, as a list or one tool's whole definition, without serving.
//!
//! ```text
//! agentgate [--config FILE] tools            each tool's name and title, one line each
//! agentgate [--config FILE] tools NAME       that tool as tools/list shows it (JSON)
//! agentgate [--config FILE] tools --json     every tool as tools/list shows them
//! ```
//!
//! The backends are built from the config as `serve` builds them (an A2A
//! agent's card is read), on a private in-memory store that is dropped at
//! the end, so the list is exactly what a client would be offered.

use agentgate_backend::Owner;
use agentgate_core::mcp::TransportKind;
use agentgate_core::runtime::Runtime;
use anyhow::{Context as _, Result, bail};
use rmcp::model::Tool;

use crate::config::FileConfig;

/// `agentgate tools`.
#[derive(Debug, clap::Args)]
pub(crate) struct ToolsArgs {
    /// Show this tool's whole definition (its input and output schemas,
    /// annotations and task support) as JSON.
    name: Option<String>,
    /// Print every tool as JSON, as `tools/list` answers.
    #[arg(long, conflicts_with = "name")]
    json: bool,
}

pub(crate) async fn run(args: ToolsArgs, file: FileConfig) -> Result<()> {
    let tools = served_tools(&file).await?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&tools)?);
        return Ok(());
    }
    match args.name {
        Some(name) => {
            let Some(tool) = tools.iter().find(|t| t.name == name) else {
                let names: Vec<&str> = tools.iter().map(|t| &*t.name).collect();
                bail!(
                    "no tool is named `{name}`; the tools are: {}",
                    names.join(", ")
                );
            };
            println!("{}", serde_json::to_string_pretty(tool)?);
        }
        None => print!("{}", table(&tools)),
    }
    Ok(())
}

/// The tools a gateway with `file`'s backends serves, in `tools/list` order.
async fn served_tools(file: &FileConfig) -> Result<Vec<Tool>> {
    let store = agentgate_core::store::open("sqlite::memory:")
        .await
        .context("opening a private in-memory store")?;
    let selection = file.server.tools.clone();
    let builder = Runtime::builder(store).read_only(file.server.read_only == Some(true));
    let runtime = crate::backends::add_all(builder, &file.backends, selection)
        .await?
        .start()?;
    let gateway = runtime
        .gateway(TransportKind::Stdio(Owner::local_user()))
        .await?;
    let tools = gateway.tools();
    // On stderr, so `--json` stays one document.
    for (backend, why) in crate::backends::not_set_up(&runtime) {
        eprintln!("{backend}: not set up, its tools are not listed: {why}");
    }
    for (name, why) in crate::backends::off(&file.backends)? {
        eprintln!("{name}: {why}");
    }
    runtime.stop().await?;
    Ok(tools)
}

/// One line per tool: its name, and its title (or else the first sentence
/// of its description).
fn table(tools: &[Tool]) -> String {
    let width = tools.iter().map(|t| t.name.len()).max().unwrap_or(0);
    let mut out = String::new();
    for tool in tools {
        let title = tool.title.clone().unwrap_or_else(|| {
            let description = tool.description.as_deref().unwrap_or_default();
            let end = description.find(". ").map_or(description.len(), |i| i + 1);
            description[..end].to_owned()
        });
        out.push_str(&format!("{:width$}  {title}\n", tool.name));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_aligns_names_and_falls_back_to_the_first_sentence() {
        let mut titled = Tool::new(
            "QBusinessQueryTool",
            "Ask it. More.",
            rmcp::model::JsonObject::new(),
        );
        titled.title = Some("Ask Amazon Q Business".into());
        let untitled = Tool::new(
            "task_status",
            "Read a task. Then more.",
            rmcp::model::JsonObject::new(),
        );
        assert_eq!(
            table(&[titled, untitled]),
            "QBusinessQueryTool  Ask Amazon Q Business\ntask_status         Read a task.\n"
        );
    }
}
