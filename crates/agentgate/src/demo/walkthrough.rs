//! The demo's narrated walkthrough: seven steps, each a real MCP exchange
//! with the gateway over HTTP through the `agentgate call` client
//! ([`crate::client`]), printed as it happens.
//!
//! 1. a Q Business question, answered with citations;
//! 2. a follow-up in the same conversation;
//! 3. a plugin action that needs approval: `input_required`, approved with
//!    `tasks/update`, then the result;
//! 4. Copilot assigned to an issue, followed live until its PR is finished;
//! 5. a Copilot task cancelled while the agent works;
//! 6. an A2A agent that asks a question: `input_required`, answered with
//!    `tasks/update`, then its answer;
//! 7. a slow tool of another MCP server (`[[mcp.servers]]`; here the
//!    emulators' plain MCP server, `agentgate sim --mcp-stdio`, which
//!    knows nothing of tasks) as a durable task: its progress,
//!    its question through `tasks/update`, its answer.
//!
//! Each step has a deadline; a failed step is reported and the walkthrough
//! goes on, so the summary says exactly what worked.

use std::future::Future;
use std::time::Instant;

use anyhow::{Context as _, Result, anyhow, bail};
use rmcp::model::{CallToolResult, InputRequests, InputResponses, TaskStatus};
use serde_json::{Value, json};

use super::STEP_DEADLINE;
use crate::client::{
    Answers, CallOutcome, Connection, FinalState, FollowObserver, InputSource, Progress,
};

/// What happened, step by step.
#[derive(Debug, Default)]
pub(crate) struct Report {
    pub steps: Vec<(String, Result<String, String>)>,
}

impl Report {
    pub(super) fn all_passed(&self) -> bool {
        self.failed() == 0
    }

    pub(super) fn failed(&self) -> usize {
        self.steps.iter().filter(|(_, r)| r.is_err()).count()
    }

    pub(super) fn print_summary(&self) {
        println!();
        println!("{}", console::style("Summary").bold());
        for (title, outcome) in &self.steps {
            match outcome {
                Ok(what) => println!("  {} {title}: {what}", console::style("ok  ").green()),
                Err(why) => println!("  {} {title}: {why}", console::style("FAIL").red()),
            }
        }
        if self.all_passed() {
            println!(
                "All {} steps worked: answers kept their citations and conversation, the \
                 approval went through tasks/update, the Copilot work was followed to its \
                 pull request as a durable task, and the A2A agent's and the MCP server's \
                 questions were answered in their tasks.",
                self.steps.len()
            );
        }
    }
}

/// How many steps the walkthrough has.
const STEPS: usize = 7;

/// Runs every step against the gateway at `url`.
pub(crate) async fn run(url: &str) -> Report {
    let mut report = Report::default();
    let connection = match Connection::http(url).await {
        Ok(connection) => connection,
        Err(e) => {
            report
                .steps
                .push(("connect".into(), Err(format!("cannot connect: {e:#}"))));
            return report;
        }
    };
    let mut conversation = None;
    step(&mut report, 1, "Ask Amazon Q Business", async {
        let (summary, ids) = ask(&connection).await?;
        conversation = Some(ids);
        Ok(summary)
    })
    .await;
    step(
        &mut report,
        2,
        "Follow up in the same conversation",
        async {
            let ids = conversation
                .clone()
                .ok_or_else(|| anyhow!("step 1 gave no conversation to follow up in"))?;
            follow_up(&connection, ids).await
        },
    )
    .await;
    step(
        &mut report,
        3,
        "A plugin action that needs approval",
        approve_action(&connection),
    )
    .await;
    step(
        &mut report,
        4,
        "Assign the Copilot cloud agent to an issue",
        assign_copilot(&connection),
    )
    .await;
    step(
        &mut report,
        5,
        "Cancel a task while the agent works",
        cancel_copilot(&connection),
    )
    .await;
    step(
        &mut report,
        6,
        "An A2A agent that asks a question",
        ask_a2a_agent(&connection),
    )
    .await;
    step(
        &mut report,
        7,
        "Another MCP server's slow tool as a durable task",
        another_mcp_server(&connection),
    )
    .await;
    connection.close().await;
    report
}

async fn step(
    report: &mut Report,
    number: usize,
    title: &str,
    work: impl Future<Output = Result<String>>,
) {
    println!();
    println!(
        "{} {}",
        console::style(format!("[{number}/{STEPS}]")).cyan().bold(),
        console::style(title).bold()
    );
    let started = Instant::now();
    let outcome = match tokio::time::timeout(STEP_DEADLINE, work).await {
        Ok(Ok(summary)) => {
            println!(
                "  {} in {:.1} s",
                console::style("done").green(),
                started.elapsed().as_secs_f64()
            );
            Ok(summary)
        }
        Ok(Err(e)) => {
            println!("  {} {e:#}", console::style("failed:").red());
            Err(format!("{e:#}"))
        }
        Err(_) => {
            let why = format!("no result within {} s", STEP_DEADLINE.as_secs());
            println!("  {} {why}", console::style("failed:").red());
            Err(why)
        }
    };
    report.steps.push((title.to_owned(), outcome));
}

/// The conversation to continue: `conversationId` and `systemMessageId`.
type ConversationIds = (Value, Value);

async fn ask(connection: &Connection) -> Result<(String, ConversationIds)> {
    let query = "How many vacation days do employees get?";
    println!("  QBusinessQueryTool {{\"query\": \"{query}\"}}");
    let result = call_and_follow(
        connection,
        "QBusinessQueryTool",
        json!({ "query": query }),
        &mut Approver,
    )
    .await?;
    let structured = answer(&result)?;
    let citations = structured["citations"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if citations.is_empty() {
        bail!("the answer came without citations");
    }
    for citation in &citations {
        println!(
            "  cited: {} <{}>",
            citation["title"].as_str().unwrap_or("(untitled)"),
            citation["url"].as_str().unwrap_or("no url")
        );
    }
    let ids = (
        structured["conversationId"].clone(),
        structured["systemMessageId"].clone(),
    );
    println!(
        "  conversationId {} (kept for the follow-up)",
        ids.0.as_str().unwrap_or("?")
    );
    Ok((
        format!("an answer with {} citation(s)", citations.len()),
        ids,
    ))
}

async fn follow_up(
    connection: &Connection,
    (conversation, parent): ConversationIds,
) -> Result<String> {
    let query = "And can unused days be carried over?";
    println!(
        "  QBusinessQueryTool {{\"query\": \"{query}\", \"conversation_id\": …, \"parent_message_id\": …}}"
    );
    let result = call_and_follow(
        connection,
        "QBusinessQueryTool",
        json!({ "query": query, "conversation_id": conversation, "parent_message_id": parent }),
        &mut Approver,
    )
    .await?;
    let structured = answer(&result)?;
    if structured["conversationId"] != conversation {
        bail!(
            "the follow-up landed in conversation {} instead of {conversation}",
            structured["conversationId"]
        );
    }
    Ok("answered in the same conversation".into())
}

async fn approve_action(connection: &Connection) -> Result<String> {
    let query = "Open a ticket: my laptop battery is swollen";
    println!(
        "  QBusinessQueryTool {{\"query\": \"{query}\", \"plugin_id\": \"{}\"}}",
        agentgate_sim::qbusiness::TICKET_PLUGIN_ID
    );
    let mut approver = Approver;
    let result = call_and_follow(
        connection,
        "QBusinessQueryTool",
        json!({ "query": query, "plugin_id": agentgate_sim::qbusiness::TICKET_PLUGIN_ID }),
        &mut approver,
    )
    .await?;
    let structured = answer(&result)?;
    if structured["outcome"] != "action_executed" {
        bail!(
            "the action was not executed (outcome {})",
            structured["outcome"]
        );
    }
    let ticket = first_text(&result)
        .trim_start_matches("Qbiz response: ")
        .to_owned();
    Ok(format!("approved, then executed: {ticket}"))
}

async fn assign_copilot(connection: &Connection) -> Result<String> {
    println!(
        "  assign_copilot_to_issue {{\"owner\": \"acme\", \"repo\": \"widgets\", \"issue_number\": 1}}"
    );
    let result = call_and_follow(
        connection,
        "assign_copilot_to_issue",
        json!({ "owner": "acme", "repo": "widgets", "issue_number": 1 }),
        &mut Approver,
    )
    .await?;
    if result.is_error == Some(true) {
        bail!("the agent did not finish: {}", first_text(&result));
    }
    let structured = result
        .structured_content
        .clone()
        .ok_or_else(|| anyhow!("the result has no structuredContent"))?;
    let pr = &structured["pull_request"];
    let url = pr["url"]
        .as_str()
        .ok_or_else(|| anyhow!("the result names no pull request: {structured}"))?;
    println!(
        "  pull request: {url} ({})",
        pr["title"].as_str().unwrap_or("")
    );
    Ok(format!("finished pull request {url}"))
}

async fn cancel_copilot(connection: &Connection) -> Result<String> {
    println!(
        "  assign_copilot_to_issue {{\"owner\": \"acme\", \"repo\": \"widgets\", \"issue_number\": 5}}"
    );
    let task = match start(
        connection,
        "assign_copilot_to_issue",
        json!({ "owner": "acme", "repo": "widgets", "issue_number": 5 }),
        &mut Approver,
    )
    .await?
    {
        CallOutcome::Task(task) => task,
        CallOutcome::Done(_) => bail!("the server answered at once instead of starting a task"),
    };
    println!("  task {} created", task.task_id);
    // Let the agent get going first: cancel once Copilot is assigned.
    loop {
        let now = connection.get(&task.task_id).await?.task;
        if now.status.is_terminal() {
            bail!(
                "the task ended ({:?}) before it could be cancelled",
                now.status
            );
        }
        if now.status_message.as_deref().is_some_and(|m| m != "queued") {
            Narrator::new().status(&now);
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(
            now.poll_interval_ms.unwrap_or(500).min(1000),
        ))
        .await;
    }
    println!("  tasks/cancel {}", task.task_id);
    connection.cancel(&task.task_id).await?;
    match connection
        .follow(&task.task_id, &mut Narrator::new(), &mut Approver)
        .await?
    {
        FinalState::Cancelled { .. } => Ok("cancelled while Copilot worked".into()),
        other => bail!(
            "the task ended {:?} instead of cancelled",
            other.task().status
        ),
    }
}

async fn ask_a2a_agent(connection: &Connection) -> Result<String> {
    let tool = format!("{}_send_message", super::A2A_AGENT);
    println!(
        "  {tool} {{\"message\": \"Please greet me\", \"metadata\": {{\"skill\": \"ask-input\"}}}}"
    );
    let mut replier = Replier {
        field: "answer",
        value: "Ada",
    };
    let args = json!({"message": "Please greet me", "metadata": {"skill": "ask-input"}});
    let result = call_and_follow(connection, &tool, args, &mut replier).await?;
    let answer = first_text(&result);
    println!("  the agent answered: {answer}");
    if answer != "Hello, Ada!" {
        bail!("the agent's answer was {answer:?}, not its greeting");
    }
    Ok("asked a question, answered through tasks/update, then greeted".into())
}

async fn another_mcp_server(connection: &Connection) -> Result<String> {
    let tool = format!("{}_countdown", super::MCP_SERVER);
    println!(
        "  {tool} {{\"seconds\": 3, \"ask\": true}}   (a tool of the MCP server behind the gateway)"
    );
    let mut replier = Replier {
        field: "name",
        value: "Grace",
    };
    let args = json!({"seconds": 3, "ask": true});
    let result = call_and_follow(connection, &tool, args, &mut replier).await?;
    let answer = first_text(&result);
    println!("  the MCP server answered: {answer}");
    if answer != "Hello, Grace!" {
        bail!("the server's answer was {answer:?}, not its greeting");
    }
    Ok("its progress followed, its question answered through tasks/update, then greeted".into())
}

/// The demo's user answering a question (a form) by filling `field` with
/// `value`.
struct Replier {
    field: &'static str,
    value: &'static str,
}

impl InputSource for Replier {
    async fn answer(&mut self, requests: &InputRequests) -> Result<InputResponses> {
        for (key, request) in requests {
            let request = serde_json::to_value(request).unwrap_or_default();
            println!(
                "  input_required [{key}]: {}",
                request["params"]["message"]
                    .as_str()
                    .unwrap_or("(no message)")
            );
            println!("  answering {:?} with tasks/update", self.value);
        }
        Answers::new(vec![(self.field.into(), self.value.into())], true, None)
            .answer(requests)
            .await
    }
}

/// Status as a word, for the narration.
trait StatusWord {
    fn status_word(&self) -> &'static str;
}

impl StatusWord for rmcp::model::Task {
    fn status_word(&self) -> &'static str {
        match self.status {
            TaskStatus::Working => "working",
            TaskStatus::InputRequired => "input required",
            TaskStatus::Completed => "completed",
            TaskStatus::Failed => "failed",
            TaskStatus::Cancelled => "cancelled",
            _ => "unknown",
        }
    }
}

async fn start(
    connection: &Connection,
    tool: &str,
    args: Value,
    input: &mut impl InputSource,
) -> Result<CallOutcome> {
    let Value::Object(args) = args else {
        bail!("tool arguments must be an object");
    };
    connection.call(tool, args, input).await
}

/// Calls `tool` and follows the task it starts until it ends; the tool's
/// result, or an error saying how the task ended otherwise.
async fn call_and_follow(
    connection: &Connection,
    tool: &str,
    args: Value,
    input: &mut impl InputSource,
) -> Result<CallToolResult> {
    let task = match start(connection, tool, args, input).await? {
        CallOutcome::Task(task) => task,
        CallOutcome::Done(result) => return Ok(result),
    };
    println!(
        "  → task {} ({}), followed with tasks/get every {} ms",
        task.task_id,
        task.status_word(),
        task.poll_interval_ms.unwrap_or(1000)
    );
    match connection
        .follow(&task.task_id, &mut Narrator::new(), input)
        .await
        .with_context(|| format!("following task {}", task.task_id))?
    {
        FinalState::Completed { result, .. } => Ok(result),
        FinalState::Failed { error, .. } => bail!("the task failed: {}", Value::Object(error)),
        FinalState::Cancelled { .. } => bail!("the task was cancelled"),
    }
}

fn answer(result: &CallToolResult) -> Result<Value> {
    if result.is_error == Some(true) {
        bail!("Q Business answered with an error: {}", first_text(result));
    }
    let structured = result
        .structured_content
        .clone()
        .ok_or_else(|| anyhow!("the result has no structuredContent"))?;
    let text = structured["answer"].as_str().unwrap_or_default();
    println!("  answer: {text}");
    Ok(structured)
}

fn first_text(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .find_map(|c| c.as_text().map(|t| t.text.clone()))
        .unwrap_or_default()
}

/// The demo's user: reads each request aloud and approves it as proposed
/// (a form's defaults are the values the backend proposed), the way
/// `agentgate call --yes` does.
struct Approver;

impl InputSource for Approver {
    async fn answer(&mut self, requests: &InputRequests) -> Result<InputResponses> {
        for (key, request) in requests {
            let request = serde_json::to_value(request).unwrap_or_default();
            let params = &request["params"];
            println!(
                "  input_required [{key}]: {}",
                params["message"].as_str().unwrap_or("(no message)")
            );
            if let Some(properties) = params["requestedSchema"]["properties"].as_object() {
                for (name, field) in properties {
                    let proposed = field
                        .get("default")
                        .map_or("(empty)".into(), Value::to_string);
                    println!("    {name} = {proposed}");
                }
            }
            println!("  approving with tasks/update");
        }
        Answers::new(Vec::new(), true, None).answer(requests).await
    }
}

/// Live status while a task runs: a spinner on a terminal; otherwise one
/// line per change, in the story on stdout.
struct Narrator {
    spinner: Option<Progress>,
}

impl Narrator {
    fn new() -> Self {
        use std::io::IsTerminal as _;
        Self {
            spinner: std::io::stdout().is_terminal().then(Progress::stderr),
        }
    }
}

impl FollowObserver for Narrator {
    fn status(&mut self, task: &rmcp::model::Task) {
        match &mut self.spinner {
            Some(spinner) => spinner.status(task),
            None => println!(
                "  status: {}{}",
                task.status_word(),
                task.status_message
                    .as_deref()
                    .map(|m| format!(" ({m})"))
                    .unwrap_or_default()
            ),
        }
    }

    fn input_needed(&mut self, requests: &InputRequests) {
        if let Some(spinner) = &mut self.spinner {
            spinner.input_needed(requests);
        }
    }

    fn answered(&mut self) {
        if let Some(spinner) = &mut self.spinner {
            spinner.answered();
        }
    }
}
