//! `agentgate call` and `agentgate task`: the command line over
//! [`Connection`], with exit statuses scripts can branch on.
//!
//! | status | meaning                                                        |
//! |--------|----------------------------------------------------------------|
//! | 0      | completed (or `--no-wait`: the task was created)               |
//! | 1      | completed with a tool error (`isError: true`)                  |
//! | 2      | the task failed or was cancelled; protocol, connection or usage error |
//! | 130    | Ctrl-C, detached: the task keeps running (`agentgate task wait ID`) |

use anyhow::{Context as _, Result, bail};
use clap::{Args, Subcommand, ValueEnum};
use rmcp::model::{CallToolResult, JsonObject, TaskPayload};
use serde_json::Value;

use super::connection::{
    CallOutcome, Connection, ConnectionError, FinalState, Server, describe_error,
};
use super::input::{Answers, SharedStdin, shared_stdin};
use super::render::{Progress, Shown, print_result, status_word};
use super::state::{StartedTask, TaskBook, now};

pub(crate) const EXIT_OK: i32 = 0;
pub(crate) const EXIT_TOOL_ERROR: i32 = 1;
pub(crate) const EXIT_FAILED: i32 = 2;
pub(crate) const EXIT_DETACHED: i32 = 130;

/// Which server to talk to.
#[derive(Debug, Args)]
pub(crate) struct ServerArgs {
    /// The server's Streamable HTTP endpoint, e.g. http://127.0.0.1:8722/mcp.
    /// A server with authentication on takes the bearer token from the
    /// AGENTGATE_TOKEN environment variable.
    #[arg(long, value_name = "URL", conflicts_with = "stdio")]
    url: Option<String>,

    /// Spawn this MCP server and speak over its stdin/stdout, e.g.
    /// --stdio "agentgate serve --stdio" (split like a shell would).
    #[arg(long, value_name = "CMD")]
    stdio: Option<String>,
}

impl ServerArgs {
    fn given(&self) -> Option<Server> {
        match (&self.url, &self.stdio) {
            (Some(url), _) => Some(Server::Http { url: url.clone() }),
            (None, Some(command)) => Some(Server::stdio(command.clone())),
            (None, None) => None,
        }
    }
}

/// What to do on Ctrl-C while following a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum OnInterrupt {
    /// Ask on a terminal; detach when stdin is not a terminal.
    Ask,
    /// Send tasks/cancel and wait for the task to stop.
    Cancel,
    /// Stop following; the task keeps running on the server.
    Detach,
}

/// How a task is followed and its input requests answered.
#[derive(Debug, Args)]
pub(crate) struct FollowArgs {
    /// Print the raw JSON result (CallToolResult) instead of its text.
    #[arg(long)]
    json: bool,

    /// Also print the result's structured content (pretty JSON) after its
    /// text. A result with no text shows it anyway, so nothing is hidden.
    #[arg(long, conflicts_with = "json")]
    structured: bool,

    /// Answer an input request: NAME is a request key (VALUE: a JSON object of
    /// form fields, or accept/decline/cancel) or a form field (VALUE: JSON if
    /// it parses, else text). Repeatable.
    #[arg(long = "input", value_name = "NAME=VALUE")]
    inputs: Vec<String>,

    /// Accept input requests without asking: defaults for fields, yes for
    /// yes/no questions, URL requests count as done.
    #[arg(long, short = 'y')]
    yes: bool,

    /// On Ctrl-C: ask (terminal; otherwise detach), cancel, or detach.
    #[arg(long, value_enum, default_value_t = OnInterrupt::Ask)]
    on_interrupt: OnInterrupt,
}

#[derive(Debug, Args)]
#[command(after_help = "\
Input requests on piped stdin: per form, lines of field=value (or one JSON object), \
ended by a blank line or end of input; `decline` or `cancel` refuses. Per URL request: \
a blank line once done.\n\
Exit status: 0 completed, 1 tool error (isError), 2 failed/cancelled or error, \
130 detached on Ctrl-C.")]
pub(crate) struct CallArgs {
    #[command(flatten)]
    server: ServerArgs,

    /// The tool to call.
    tool: String,

    /// An argument: key=value, the value as JSON if it parses, else a
    /// string (--arg n=5 is a number, --arg q=hello a string). Repeatable.
    #[arg(long = "arg", value_name = "KEY=VALUE")]
    args: Vec<String>,

    /// All arguments as one JSON object; --arg values are added over it.
    #[arg(long = "args", value_name = "JSON")]
    args_json: Option<String>,

    /// Print the task id and return at once instead of following the task.
    #[arg(long)]
    no_wait: bool,

    #[command(flatten)]
    follow: FollowArgs,
}

#[derive(Debug, Args)]
pub(crate) struct TaskArgs {
    #[command(subcommand)]
    command: TaskCommand,
}

#[derive(Debug, Subcommand)]
enum TaskCommand {
    /// The tasks started from this machine (last status seen; no server is asked).
    List {
        /// One JSON array of records.
        #[arg(long)]
        json: bool,
    },
    /// Ask the server for a task's current state.
    Get {
        /// The task id (ids may start with `-`).
        #[arg(allow_hyphen_values = true)]
        id: String,
        #[command(flatten)]
        server: ServerArgs,
        /// The raw tasks/get result.
        #[arg(long)]
        json: bool,
    },
    /// Follow a task to its end, answering input requests; exit status as for `call`.
    Wait {
        /// The task id (ids may start with `-`).
        #[arg(allow_hyphen_values = true)]
        id: String,
        #[command(flatten)]
        server: ServerArgs,
        #[command(flatten)]
        follow: FollowArgs,
    },
    /// Ask the server to cancel a task (cooperative: see `task get` for the outcome).
    Cancel {
        /// The task id (ids may start with `-`).
        #[arg(allow_hyphen_values = true)]
        id: String,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Remove a task from the local list (the server is not told).
    Forget {
        #[arg(allow_hyphen_values = true)]
        id: String,
    },
}

/// `agentgate call`; returns the exit status.
pub(crate) async fn call(args: CallArgs) -> i32 {
    report(run_call(args).await)
}

/// `agentgate task`; returns the exit status.
pub(crate) async fn task(args: TaskArgs) -> i32 {
    report(run_task(args).await)
}

fn report(outcome: Result<i32>) -> i32 {
    outcome.unwrap_or_else(|e| {
        eprintln!(
            "{} {e:#}",
            console::style("error:").for_stderr().red().bold()
        );
        EXIT_FAILED
    })
}

/// `--arg key=value` pairs over `--args JSON`.
pub(crate) fn parse_arguments(pairs: &[String], json: Option<&str>) -> Result<JsonObject> {
    let mut args = match json {
        None => JsonObject::new(),
        Some(text) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(map)) => map,
            Ok(_) => bail!("--args must be a JSON object, e.g. --args '{{\"query\": \"hi\"}}'"),
            Err(e) => bail!("--args is not valid JSON ({e}): {text}"),
        },
    };
    for pair in pairs {
        let Some((key, value)) = pair.split_once('=').filter(|(k, _)| !k.trim().is_empty()) else {
            bail!("--arg {pair:?} is malformed: expected key=value, e.g. --arg seconds=5");
        };
        let value = serde_json::from_str(value).unwrap_or_else(|_| Value::String(value.to_owned()));
        args.insert(key.trim().to_owned(), value);
    }
    Ok(args)
}

/// `--input NAME=VALUE` pairs.
fn parse_inputs(inputs: &[String]) -> Result<Vec<(String, String)>> {
    inputs
        .iter()
        .map(|pair| match pair.split_once('=') {
            Some((name, value)) if !name.trim().is_empty() => {
                Ok((name.trim().to_owned(), value.to_owned()))
            }
            _ => bail!(
                "--input {pair:?} is malformed: expected NAME=VALUE, e.g. --input confirm=true"
            ),
        })
        .collect()
}

async fn run_call(args: CallArgs) -> Result<i32> {
    let arguments = parse_arguments(&args.args, args.args_json.as_deref())?;
    let presets = parse_inputs(&args.follow.inputs)?;
    let server = args
        .server
        .given()
        .context("say which server to call: --url URL or --stdio \"CMD ARGS\"")?;
    let book = TaskBook::open_default()?;
    let conn = Connection::open(&server).await?;
    let stdin = shared_stdin();
    let mut answers = Answers::new(presets, args.follow.yes, Some(stdin.clone()));
    let task = match conn.call(&args.tool, arguments, &mut answers).await? {
        CallOutcome::Done(result) => {
            conn.close().await;
            return Ok(finish_result(&result, shown(&args.follow), &args.tool));
        }
        CallOutcome::Task(task) => task,
    };
    let id = task.task_id.clone();
    let record = StartedTask {
        task_id: id.clone(),
        server: server.clone(),
        tool: args.tool.clone(),
        created_at: now(),
        last_status: status_name(task.status),
        last_seen: now(),
    };
    if let Err(e) = book.save(&record) {
        // The task exists either way; say so rather than lose the result.
        eprintln!("warning: task {id} is not in the local task list: {e:#}");
    }
    if args.no_wait {
        if args.follow.json {
            println!("{}", serde_json::to_string_pretty(&task)?);
        } else {
            println!("{id}");
        }
        eprintln!("task {id} started; follow it with: agentgate task wait {id}");
        conn.close().await;
        return Ok(EXIT_OK);
    }
    let code = follow_task(&conn, &book, &id, &args.follow, &mut answers, &stdin).await;
    conn.close().await;
    code
}

async fn run_task(args: TaskArgs) -> Result<i32> {
    let book = TaskBook::open_default()?;
    match args.command {
        TaskCommand::List { json } => list(&book, json),
        TaskCommand::Forget { id } => {
            book.forget(&id)?;
            eprintln!("forgot task {id}");
            Ok(EXIT_OK)
        }
        TaskCommand::Get { id, server, json } => {
            let conn = connect_for(&book, &id, &server).await?;
            let detailed = conn.get(&id).await?;
            conn.close().await;
            book.note_status(&id, &status_name(detailed.task.status))?;
            if json {
                println!("{}", serde_json::to_string_pretty(&detailed)?);
                return Ok(EXIT_OK);
            }
            let task = &detailed.task;
            println!("task       {}", task.task_id);
            println!("status     {}", status_word(task.status));
            if let Some(message) = &task.status_message {
                println!("message    {message}");
            }
            println!("created    {}", task.created_at);
            println!("updated    {}", task.last_updated_at);
            match &detailed.payload {
                TaskPayload::InputRequired { input_requests } => {
                    for (key, request) in input_requests {
                        let request = serde_json::to_value(request)?;
                        let message = request["params"]["message"].as_str().unwrap_or_default();
                        println!("asks       {key}: {message}");
                    }
                    println!("answer with: agentgate task wait {id}");
                }
                TaskPayload::Completed { result } => {
                    println!();
                    let result: CallToolResult =
                        serde_json::from_value(Value::Object(result.clone()))
                            .context("the task's result is not a CallToolResult")?;
                    print_result(&result, Shown::Text);
                }
                TaskPayload::Failed { error } => {
                    println!("error      {}", Value::Object(error.clone()));
                }
                _ => {}
            }
            Ok(EXIT_OK)
        }
        TaskCommand::Wait { id, server, follow } => {
            let presets = parse_inputs(&follow.inputs)?;
            let conn = connect_for(&book, &id, &server).await?;
            let stdin = shared_stdin();
            let mut answers = Answers::new(presets, follow.yes, Some(stdin.clone()));
            let code = follow_task(&conn, &book, &id, &follow, &mut answers, &stdin).await;
            conn.close().await;
            code
        }
        TaskCommand::Cancel { id, server } => {
            let conn = connect_for(&book, &id, &server).await?;
            conn.cancel(&id).await?;
            let status = conn.get(&id).await.map(|d| d.task.status);
            conn.close().await;
            match status {
                Ok(status) => {
                    book.note_status(&id, &status_name(status))?;
                    eprintln!(
                        "cancel requested for task {id}; it is now {}",
                        status_word(status)
                    );
                }
                Err(_) => eprintln!("cancel requested for task {id}"),
            }
            Ok(EXIT_OK)
        }
    }
}

fn list(book: &TaskBook, json: bool) -> Result<i32> {
    let records = book.list()?;
    if json {
        println!("{}", serde_json::to_string_pretty(&records)?);
        return Ok(EXIT_OK);
    }
    if records.is_empty() {
        eprintln!("no tasks in {}", book.dir().display());
        return Ok(EXIT_OK);
    }
    let width = records
        .iter()
        .map(|r| r.task_id.len())
        .max()
        .unwrap_or(2)
        .max(2);
    println!(
        "{:width$}  {:14}  {:20}  {:20}  SERVER",
        "ID", "STATUS", "TOOL", "CREATED"
    );
    for r in records {
        println!(
            "{:width$}  {:14}  {:20}  {:20}  {}",
            r.task_id, r.last_status, r.tool, r.created_at, r.server
        );
    }
    Ok(EXIT_OK)
}

/// Connects to the server named by flags, else the one recorded for `id`.
async fn connect_for(book: &TaskBook, id: &str, flags: &ServerArgs) -> Result<Connection> {
    let server = match flags.given() {
        Some(server) => server,
        None => match book.get(id)? {
            Some(record) => record.server,
            None => bail!(
                "task {id} is not in the local task list ({}); say where it lives with --url URL \
                 or --stdio \"CMD ARGS\"",
                book.dir().display()
            ),
        },
    };
    Connection::open(&server).await
}

fn status_name(status: rmcp::model::TaskStatus) -> String {
    serde_json::to_value(status)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| format!("{status:?}"))
}

/// Follows `id` with a progress display, handling Ctrl-C, and prints the end.
async fn follow_task(
    conn: &Connection,
    book: &TaskBook,
    id: &str,
    opts: &FollowArgs,
    answers: &mut Answers,
    stdin: &SharedStdin,
) -> Result<i32> {
    let resume = format!("task {id} is still on the server; resume with: agentgate task wait {id}");
    let mut progress = Progress::stderr();
    let mut cancelling = false;
    let end = loop {
        tokio::select! {
            end = conn.follow(id, &mut progress, answers) => {
                break end.map_err(|e| with_resume_hint(e, &resume))?;
            }
            _ = tokio::signal::ctrl_c() => {}
        }
        progress.clear();
        let choice = if cancelling {
            // A second Ctrl-C while waiting for a cancel to land.
            OnInterrupt::Detach
        } else {
            decide(opts.on_interrupt, stdin).await
        };
        match choice {
            OnInterrupt::Cancel => {
                conn.cancel(id).await?;
                cancelling = true;
                eprintln!(
                    "cancel requested; waiting for task {id} to stop (Ctrl-C again to stop waiting)"
                );
            }
            OnInterrupt::Detach => {
                eprintln!("detached: {resume}");
                return Ok(EXIT_DETACHED);
            }
            OnInterrupt::Ask => eprintln!("still following task {id}"),
        }
    };
    progress.clear();
    let task = end.task();
    book.note_status(id, &status_name(task.status))?;
    for name in answers.unused() {
        eprintln!("warning: --input {name} matched no input request or form field");
    }
    Ok(match &end {
        FinalState::Completed { result, task } => {
            let tool = book
                .get(&task.task_id)
                .ok()
                .flatten()
                .map(|r| r.tool)
                .unwrap_or_default();
            finish_result(result, shown(opts), &tool)
        }
        FinalState::Failed { task, error } => {
            if opts.json {
                let mut out = serde_json::to_value(task)?;
                out["error"] = Value::Object(error.clone());
                println!("{}", serde_json::to_string_pretty(&out)?);
            }
            let message = serde_json::from_value::<rmcp::ErrorData>(Value::Object(error.clone()))
                .map(|e| describe_error(&e))
                .unwrap_or_else(|_| Value::Object(error.clone()).to_string());
            eprintln!("task {id} {}: {message}", status_word(task.status));
            EXIT_FAILED
        }
        FinalState::Cancelled { task } => {
            if opts.json {
                println!("{}", serde_json::to_string_pretty(task)?);
            }
            eprintln!("task {id} was {}", status_word(task.status));
            EXIT_FAILED
        }
    })
}

/// `e`, then how to pick the task up again: the cause is what a person
/// reads first (`{:#}` would put a context before it). A task the server
/// does not know has nothing to resume.
fn with_resume_hint(e: anyhow::Error, resume: &str) -> anyhow::Error {
    let unknown = e
        .downcast_ref::<ConnectionError>()
        .is_some_and(ConnectionError::is_unknown_task);
    if unknown {
        e
    } else {
        anyhow::anyhow!("{e:#}\n{resume}")
    }
}

/// Asks what to do on Ctrl-C (terminal only; otherwise the documented default).
async fn decide(mode: OnInterrupt, stdin: &SharedStdin) -> OnInterrupt {
    use std::io::{IsTerminal as _, Write as _};
    if mode != OnInterrupt::Ask {
        return mode;
    }
    if !std::io::stdin().is_terminal() {
        return OnInterrupt::Detach;
    }
    loop {
        eprint!("\nCtrl-C: [c]ancel the task, [d]etach and leave it running, or [k]eep waiting? ");
        let _ = std::io::stderr().flush();
        let line = stdin.lock().await.next_line().await;
        match line.ok().flatten().as_deref().map(str::trim) {
            Some("c" | "cancel") => return OnInterrupt::Cancel,
            Some("d" | "detach") | None => return OnInterrupt::Detach,
            Some("k" | "keep" | "") => return OnInterrupt::Ask,
            Some(_) => {}
        }
    }
}

/// How `--json` and `--structured` ask for a result to be shown.
fn shown(opts: &FollowArgs) -> Shown {
    match (opts.json, opts.structured) {
        (true, _) => Shown::Json,
        (false, true) => Shown::TextAndStructured,
        (false, false) => Shown::Text,
    }
}

fn finish_result(result: &CallToolResult, shown: Shown, tool: &str) -> i32 {
    print_result(result, shown);
    if result.is_error == Some(true) {
        eprintln!("tool `{tool}` reported an error");
        EXIT_TOOL_ERROR
    } else {
        EXIT_OK
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn arguments_are_json_when_they_parse_and_strings_otherwise() {
        let args = parse_arguments(
            &[
                "n=5".into(),
                "q=hello world".into(),
                "o={\"a\":1}".into(),
                "s=\"5\"".into(),
            ],
            Some("{\"q\": \"x\", \"keep\": true}"),
        )
        .expect("valid");
        assert_eq!(
            Value::Object(args),
            json!({"n": 5, "q": "hello world", "o": {"a": 1}, "s": "5", "keep": true})
        );
    }

    #[test]
    fn task_ids_may_start_with_a_hyphen() {
        use clap::Parser as _;
        #[derive(Debug, clap::Parser)]
        struct Cli {
            #[command(flatten)]
            task: TaskArgs,
        }
        let cli = Cli::try_parse_from(["t", "wait", "-9Ab_c", "--yes"]).expect("parses");
        let TaskCommand::Wait { id, follow, .. } = cli.task.command else {
            panic!("expected wait")
        };
        assert_eq!(id, "-9Ab_c");
        assert!(follow.yes);
    }

    #[test]
    fn malformed_arguments_name_the_culprit() {
        let err =
            parse_arguments(&["ok=1".into(), "oops".into()], None).expect_err("a pair without `=`");
        assert!(err.to_string().contains("\"oops\""), "{err}");
        assert!(parse_arguments(&["=1".into()], None).is_err());
        let err = parse_arguments(&[], Some("[1]")).expect_err("an array, not an object");
        assert!(err.to_string().contains("JSON object"), "{err}");
    }
}
