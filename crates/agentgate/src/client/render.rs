//! Showing a task as it runs, and its result when it ends.
//!
//! Progress goes to stderr and the result to stdout, so `agentgate call … >
//! out.txt` keeps only the answer. On a terminal progress is a spinner with
//! the task's status message and colour; otherwise one plain line per change
//! (colour only on a terminal: `console` checks, and honours `NO_COLOR`).

use std::io::IsTerminal as _;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use rmcp::model::{CallToolResult, InputRequests, Task, TaskStatus};
use serde_json::Value;

/// Sees a followed task change. Every method has a default that does nothing.
pub(crate) trait FollowObserver {
    /// The status or status message changed (called once at the start too).
    fn status(&mut self, _task: &Task) {}
    /// New input requests are about to be asked (a display should step aside).
    fn input_needed(&mut self, _requests: &InputRequests) {}
    /// The answers were sent with `tasks/update`.
    fn answered(&mut self) {}
}

/// Observes nothing.
#[allow(dead_code)] // API for `agentgate demo`.
#[derive(Debug, Default)]
pub(crate) struct Quiet;

impl FollowObserver for Quiet {}

/// A spinner on a terminal, plain lines otherwise.
#[derive(Debug)]
pub(crate) struct Progress {
    spinner: Option<ProgressBar>,
    tty: bool,
    last: String,
}

impl Progress {
    /// Progress on stderr, a spinner when stderr is a terminal.
    pub(crate) fn stderr() -> Self {
        Self {
            spinner: None,
            tty: std::io::stderr().is_terminal(),
            last: String::new(),
        }
    }

    /// Removes the spinner (before a prompt or the result).
    pub(crate) fn clear(&mut self) {
        if let Some(spinner) = self.spinner.take() {
            spinner.finish_and_clear();
        }
    }

    fn line(task: &Task) -> String {
        let status = status_word(task.status);
        match &task.status_message {
            Some(message) => format!("{status}: {message}"),
            None => status.to_string(),
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.clear();
    }
}

/// A task status as a (coloured on a terminal) word.
pub(crate) fn status_word(status: TaskStatus) -> console::StyledObject<&'static str> {
    let style = console::Style::new().for_stderr();
    match status {
        TaskStatus::Working => style.cyan().apply_to("working"),
        TaskStatus::InputRequired => style.yellow().apply_to("input required"),
        TaskStatus::Completed => style.green().apply_to("completed"),
        TaskStatus::Failed => style.red().apply_to("failed"),
        TaskStatus::Cancelled => style.red().apply_to("cancelled"),
        _ => style.apply_to("unknown"),
    }
}

impl FollowObserver for Progress {
    fn status(&mut self, task: &Task) {
        let line = Self::line(task);
        if !self.tty {
            if line != self.last {
                eprintln!("task {}: {line}", task.task_id);
            }
            self.last = line;
            return;
        }
        if task.status.is_terminal() {
            self.clear();
            return;
        }
        let spinner = self.spinner.get_or_insert_with(|| {
            let bar = ProgressBar::new_spinner();
            bar.set_style(
                ProgressStyle::with_template("{spinner:.cyan} {msg} {elapsed:.dim}")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            bar.enable_steady_tick(Duration::from_millis(100));
            bar
        });
        spinner.set_message(line);
    }

    fn input_needed(&mut self, _requests: &InputRequests) {
        self.clear();
    }
}

/// What of a tool result to print.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shown {
    /// The content, for a person; structured content only when the result
    /// has no text to show.
    Text,
    /// The content, then the structured content as pretty JSON (unless a
    /// text block already is exactly that JSON).
    TextAndStructured,
    /// The raw `CallToolResult` as JSON, for scripts.
    Json,
}

/// Prints a tool result to stdout: text blocks as they are, other blocks as
/// one line each, and structured content as [`Shown`] says.
pub(crate) fn print_result(result: &CallToolResult, shown: Shown) {
    if shown == Shown::Json {
        println!(
            "{}",
            serde_json::to_string_pretty(result)
                .unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
        );
        return;
    }
    let mut texts = Vec::new();
    for block in &result.content {
        let block = serde_json::to_value(block).unwrap_or_default();
        let field = |k: &str| block.get(k).and_then(Value::as_str).unwrap_or_default();
        match field("type") {
            "text" => {
                texts.push(field("text").to_owned());
                println!("{}", field("text"));
            }
            "resource_link" => println!("→ {} <{}>", field("name"), field("uri")),
            "image" | "audio" => println!(
                "[{} {}, {} bytes base64]",
                field("type"),
                field("mimeType"),
                field("data").len()
            ),
            "resource" => {
                let resource = block.get("resource").cloned().unwrap_or_default();
                let uri = resource
                    .get("uri")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                match resource.get("text").and_then(Value::as_str) {
                    Some(text) => println!("[resource {uri}]\n{text}"),
                    None => println!("[resource {uri}, binary]"),
                }
            }
            other => println!("[{other} content]"),
        }
    }
    let wanted = shown == Shown::TextAndStructured || texts.is_empty();
    if let Some(structured) = result.structured_content.as_ref().filter(|_| wanted) {
        let duplicate = texts
            .iter()
            .any(|t| serde_json::from_str::<Value>(t).ok().as_ref() == Some(structured));
        if !duplicate {
            println!(
                "{}",
                serde_json::to_string_pretty(structured).unwrap_or_default()
            );
        }
    }
}
