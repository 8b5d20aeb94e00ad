//! The Tasks-extension fixture tools the conformance suite calls, each a job
//! on agentgate's engine and store (not rmcp's in-memory task manager).
//!
//! | tool                 | job                                                  |
//! |----------------------|------------------------------------------------------|
//! | `slow_compute`       | waits `seconds` in checkpointed steps, then answers  |
//! | `failing_job`        | completes with an `isError` tool result (task-only)  |
//! | `protocol_error_job` | fails with a JSON-RPC error                          |
//! | `confirm_delete`     | asks one elicitation (after `ask_after_seconds`), answers with the choice |
//! | `multi_input`        | asks two elicitations at once                        |
//! | `test_tool_with_task`| greets a name gathered by MRTR before the task       |
//!
//! `greet` is synchronous by design and is answered by the fixture directly.

use std::time::Duration;

use agentgate_backend::{
    Event, Job, JobContext, JobError, Millis, PollPolicy, Step, StepResult, ToolPolicy, ToolSpec,
};
use rmcp::model::{
    CallToolResult, ContentBlock, ElicitRequest, ElicitRequestParams, ErrorData, InputRequest,
    InputRequests, InputResponses,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// Every task-capable fixture tool; clients without the tasks extension wait
/// inline up to `sync_budget`.
pub(crate) fn tools(sync_budget: Duration) -> Vec<ToolSpec> {
    let policy = |sync_fallback| {
        ToolPolicy::default()
            .ttl(Some(Duration::from_secs(3600)))
            .poll(PollPolicy::fixed(Duration::from_millis(100)))
            .sync_budget(sync_budget)
            .step_timeout(Duration::from_secs(30))
            .sync_fallback(sync_fallback)
    };
    vec![
        ToolSpec::new(
            "slow_compute",
            "Task-capable: waits `seconds` (default 1) then returns a result; honours cancel.",
            policy(true),
            SlowCompute,
        ),
        ToolSpec::new(
            "failing_job",
            "Task-only: ends with a tool execution error (isError).",
            policy(false),
            FailingJob,
        ),
        ToolSpec::new(
            "protocol_error_job",
            "Task-capable: ends with a protocol-level error (task status failed).",
            policy(true),
            ProtocolErrorJob,
        ),
        ToolSpec::new(
            "confirm_delete",
            "Task-capable: asks for confirmation through one elicitation input request.",
            policy(true),
            ConfirmDelete,
        ),
        ToolSpec::new(
            "multi_input",
            "Task-capable: asks two elicitation input requests at once.",
            policy(true),
            MultiInput,
        ),
        ToolSpec::new(
            "test_tool_with_task",
            "MRTR round 1 gathers user_name, round 2 starts a task that greets it.",
            policy(false),
            GreetLater,
        ),
    ]
}

fn text(s: String) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(s)])
}

/// After `ms` milliseconds from the step that started the wait.
fn wait<S>(state: S, status: &str, ms: u64) -> Step<S> {
    Step::Wait {
        state,
        status: Some(status.to_owned()),
        after: Duration::from_millis(ms),
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct SlowArgs {
    /// Seconds to compute for.
    #[serde(default)]
    seconds: Option<f64>,
    /// A label echoed in the result.
    #[serde(default)]
    label: Option<String>,
}

#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct SlowState {
    until: Millis,
    seconds: f64,
    label: String,
}

#[derive(Debug)]
pub(crate) struct SlowCompute;

impl Job for SlowCompute {
    type Args = SlowArgs;
    type State = SlowState;

    async fn start(&self, args: SlowArgs, cx: &JobContext) -> StepResult<SlowState> {
        let seconds = args.seconds.unwrap_or(1.0);
        if !(0.0..=3600.0).contains(&seconds) {
            return Ok(Step::Done(CallToolResult::error(vec![ContentBlock::text(
                format!("Error: field `seconds` must be between 0 and 3600, got {seconds}"),
            )])));
        }
        let state = SlowState {
            until: cx.now.saturating_add(Duration::from_secs_f64(seconds)),
            seconds,
            label: args.label.unwrap_or_else(|| "compute".to_owned()),
        };
        self.resume(state, Event::Tick, cx).await
    }

    async fn resume(&self, state: SlowState, _: Event, cx: &JobContext) -> StepResult<SlowState> {
        let left = state.until.since(cx.now);
        if left.is_zero() {
            return Ok(Step::Done(text(format!(
                "slow_compute({}) done after {}s",
                state.label, state.seconds
            ))));
        }
        let status = format!(
            "computing {} ({:.1}s left)",
            state.label,
            left.as_secs_f64()
        );
        // Wake at least every 250 ms so status messages move.
        let left_ms = u64::try_from(left.as_millis()).unwrap_or(u64::MAX);
        Ok(wait(state, &status, left_ms.min(250)))
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct NoArgs {}

#[derive(Debug)]
pub(crate) struct FailingJob;

impl Job for FailingJob {
    type Args = NoArgs;
    type State = ();

    async fn start(&self, _: NoArgs, _: &JobContext) -> StepResult<()> {
        Ok(wait((), "working", 300))
    }

    async fn resume(&self, _: (), _: Event, _: &JobContext) -> StepResult<()> {
        Ok(Step::Done(CallToolResult::error(vec![ContentBlock::text(
            "failing_job: intentional tool execution error",
        )])))
    }
}

#[derive(Debug)]
pub(crate) struct ProtocolErrorJob;

impl Job for ProtocolErrorJob {
    type Args = NoArgs;
    type State = ();

    async fn start(&self, _: NoArgs, _: &JobContext) -> StepResult<()> {
        Ok(wait((), "working", 200))
    }

    async fn resume(&self, _: (), _: Event, _: &JobContext) -> StepResult<()> {
        Ok(Step::Fail(ErrorData::internal_error(
            "protocol_error_job: intentional protocol-level failure",
            None,
        )))
    }
}

/// A form elicitation asking for typed fields.
fn elicitation(
    message: &str,
    properties: Value,
    required: &[&str],
) -> Result<InputRequest, JobError> {
    let schema = json!({"type": "object", "properties": properties, "required": required});
    let requested_schema = serde_json::from_value(schema).map_err(|e| {
        JobError::Fatal(ErrorData::internal_error(
            format!("fixture elicitation schema is invalid: {e}"),
            None,
        ))
    })?;
    Ok(InputRequest::Elicitation(ElicitRequest::new(
        ElicitRequestParams::FormElicitationParams {
            meta: None,
            message: message.to_owned(),
            requested_schema,
        },
    )))
}

/// The accepted content of an elicitation answer.
fn answer<'a>(responses: &'a InputResponses, key: &str, field: &str) -> Option<&'a Value> {
    let response = responses.get(key)?;
    if response.get("action").and_then(Value::as_str) != Some("accept") {
        return None;
    }
    response.get("content")?.get(field)
}

#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct DeleteArgs {
    /// The file to delete.
    #[serde(default)]
    filename: Option<String>,
    /// Seconds to work before asking (default 0), so a call can outlive its
    /// sync budget before the question comes.
    #[serde(default)]
    ask_after_seconds: Option<f64>,
}

#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct DeleteState {
    filename: String,
    /// When to ask; `None` once the question is out.
    ask_at: Option<Millis>,
}

#[derive(Debug)]
pub(crate) struct ConfirmDelete;

impl ConfirmDelete {
    fn ask(filename: String) -> StepResult<DeleteState> {
        let mut requests = InputRequests::new();
        requests.insert(
            "confirm".to_owned(),
            elicitation(
                &format!("Delete {filename}?"),
                json!({"confirm": {"type": "boolean", "description": "Yes, delete it"}}),
                &["confirm"],
            )?,
        );
        Ok(Step::Ask {
            state: DeleteState {
                filename,
                ask_at: None,
            },
            status: Some("waiting for confirmation".to_owned()),
            requests,
        })
    }
}

impl Job for ConfirmDelete {
    type Args = DeleteArgs;
    type State = DeleteState;

    async fn start(&self, args: DeleteArgs, cx: &JobContext) -> StepResult<DeleteState> {
        let filename = args.filename.unwrap_or_else(|| "file.txt".to_owned());
        let delay = args.ask_after_seconds.unwrap_or(0.0);
        if !(0.0..=3600.0).contains(&delay) {
            return Ok(Step::Done(CallToolResult::error(vec![ContentBlock::text(
                format!("Error: field `ask_after_seconds` must be between 0 and 3600, got {delay}"),
            )])));
        }
        if delay == 0.0 {
            return Self::ask(filename);
        }
        let ask_at = cx.now.saturating_add(Duration::from_secs_f64(delay));
        Ok(wait(
            DeleteState {
                filename,
                ask_at: Some(ask_at),
            },
            "working before asking",
            u64::try_from(Duration::from_secs_f64(delay).as_millis()).unwrap_or(u64::MAX),
        ))
    }

    async fn resume(
        &self,
        state: DeleteState,
        event: Event,
        cx: &JobContext,
    ) -> StepResult<DeleteState> {
        if let Some(ask_at) = state.ask_at {
            if cx.now < ask_at {
                let left = u64::try_from(ask_at.since(cx.now).as_millis()).unwrap_or(u64::MAX);
                return Ok(wait(state, "working before asking", left));
            }
            return Self::ask(state.filename);
        }
        let Event::Input(responses) = event else {
            return Ok(Step::Wait {
                state,
                status: None,
                after: Duration::from_secs(3600),
            });
        };
        let confirmed = answer(&responses, "confirm", "confirm")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        Ok(Step::Done(text(format!(
            "confirm_delete({}): confirmed = {confirmed}",
            state.filename
        ))))
    }
}

#[derive(Debug)]
pub(crate) struct MultiInput;

impl Job for MultiInput {
    type Args = NoArgs;
    type State = ();

    async fn start(&self, _: NoArgs, _: &JobContext) -> StepResult<()> {
        let mut requests = InputRequests::new();
        for (key, label) in [("input-a", "A"), ("input-b", "B")] {
            requests.insert(
                key.to_owned(),
                elicitation(
                    &format!("Provide value {label}"),
                    json!({"value": {"type": "string"}}),
                    &["value"],
                )?,
            );
        }
        Ok(Step::Ask {
            state: (),
            status: Some("waiting for two values".to_owned()),
            requests,
        })
    }

    async fn resume(&self, _: (), event: Event, _: &JobContext) -> StepResult<()> {
        let Event::Input(responses) = event else {
            return Ok(wait((), "waiting for two values", 3_600_000));
        };
        let get = |key| {
            answer(&responses, key, "value")
                .and_then(Value::as_str)
                .unwrap_or("(none)")
                .to_owned()
        };
        Ok(Step::Done(text(format!(
            "multi_input: a = {}, b = {}",
            get("input-a"),
            get("input-b")
        ))))
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct GreetLaterArgs {
    /// The name gathered in the MRTR round.
    user_name: String,
}

#[derive(Debug)]
pub(crate) struct GreetLater;

impl Job for GreetLater {
    type Args = GreetLaterArgs;
    type State = String;

    async fn start(&self, args: GreetLaterArgs, _: &JobContext) -> StepResult<String> {
        Ok(wait(args.user_name, "greeting", 200))
    }

    async fn resume(&self, name: String, _: Event, _: &JobContext) -> StepResult<String> {
        Ok(Step::Done(text(format!("Hello, {name}! (async)"))))
    }
}
