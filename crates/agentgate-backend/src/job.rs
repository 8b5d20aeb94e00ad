//! Jobs: the work behind a tool, written as a checkpointed state machine.
//!
//! A job never holds its progress in a running future. `start` and `resume`
//! each run one *step* and return a [`Step`]: done, failed, wait and run again,
//! or ask the client for input. The scheduler persists every step, so any
//! process can continue any task after a crash, a restart or on another
//! instance; re-attaching means running the next step from the saved state.
//!
//! A step that has a side effect upstream must be safe to repeat: it may run
//! again if the process dies before its checkpoint is saved. Derive upstream
//! idempotency tokens from [`JobContext::idempotency_key`].

use std::borrow::Cow;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{CallToolResult, ErrorData, InputRequests, InputResponses, JsonObject};
use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::ownership::{InMemoryUpstreamIds, UpstreamIdBook, UpstreamIds};
use crate::sync_view::{BoxFuture, SyncView};
use crate::{Millis, Owner, TaskId, ToolPolicy};

/// What a step decided.
#[derive(Debug)]
pub enum Step<S> {
    /// Finished with a tool result. Tool errors are `isError` results and
    /// still end the task `completed`.
    Done(CallToolResult),
    /// A protocol-level failure: the task ends `failed` with this error.
    Fail(ErrorData),
    /// Keep working: save `state` and run again after `after` (sooner when a
    /// cancel or input arrives).
    Wait {
        /// What the next step starts from.
        state: S,
        /// The task's `statusMessage` while it waits (`None` keeps none).
        status: Option<String>,
        /// How long until the next step, at most.
        after: Duration,
    },
    /// Ask the client: the task goes `input_required` until every request
    /// is answered. Keys must be unique for the task's whole life.
    Ask {
        /// What the step after the answers starts from.
        state: S,
        /// The task's `statusMessage` while it waits for the answers.
        status: Option<String>,
        /// The questions, by key (the Tasks extension's `inputRequests`).
        requests: InputRequests,
    },
    /// The job honoured a cancel request. `status` is the task's last
    /// `statusMessage` when there is more to say than "cancelled" (work
    /// the upstream goes on with, which agentgate cannot stop).
    Cancelled {
        /// Replaces the default "cancelled".
        status: Option<String>,
    },
}

/// Why a step is running again.
#[derive(Debug, Clone)]
pub enum Event {
    /// The wait is over (or the process restarted and picked the task up).
    Tick,
    /// Every outstanding input request was answered.
    Input(InputResponses),
}

/// A step that did not produce a [`Step`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JobError {
    /// Worth trying again later (upstream 5xx, throttling, a network blip).
    /// The scheduler backs off, keeps the task `working` with a status message
    /// saying so, and fails it after too many attempts in a row.
    #[error("{message}")]
    Retryable {
        /// What went wrong, for the status message and, at the end, the error.
        message: String,
        /// How long upstream asked to wait (`Retry-After`); the backoff
        /// waits at least this long.
        retry_after: Option<Duration>,
    },
    /// Not worth retrying: the task fails with this protocol error.
    #[error("{}", .0.message)]
    Fatal(ErrorData),
}

/// What a step returns.
pub type StepResult<S> = Result<Step<S>, JobError>;

/// Facts a step may need about the task it runs for.
///
/// Built by the engine from the stored task ([`JobContext::new`]); the
/// fields may grow, so code outside the engine reads them and never builds
/// one literally.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct JobContext {
    /// The task the step runs for.
    pub task_id: TaskId,
    /// The principal the task belongs to. A backend takes the upstream
    /// identity (a Q Business user, a GitHub token, the agents it may use)
    /// from this principal's configuration, never from the tool arguments.
    pub owner: Owner,
    /// How many steps were checkpointed before this one.
    pub step: i64,
    /// Wall-clock time at the start of the step, in Unix milliseconds.
    pub now: Millis,
    /// Which upstream ids (conversations, contexts) are the owner's.
    upstream_ids: UpstreamIds,
}

impl JobContext {
    /// The context of step `step` of `owner`'s task `task_id`, at `now`.
    /// Its [`upstream_ids`](Self::upstream_ids) are kept in memory for this
    /// context alone until [`with_upstream_ids`](Self::with_upstream_ids)
    /// gives it a shared book (the engine gives every step the task store's).
    pub fn new(task_id: TaskId, owner: Owner, step: i64, now: Millis) -> Self {
        let upstream_ids =
            UpstreamIds::new(Arc::new(InMemoryUpstreamIds::default()), owner.clone());
        Self {
            task_id,
            owner,
            step,
            now,
            upstream_ids,
        }
    }

    /// Keeps the bindings of upstream ids to principals in `book`.
    pub fn with_upstream_ids(mut self, book: Arc<dyn UpstreamIdBook>) -> Self {
        self.upstream_ids = UpstreamIds::new(book, self.owner.clone());
        self
    }

    /// Which upstream ids belong to the task's owner: bind the ids upstream
    /// gives a task, and check an id a caller passes before continuing it
    /// (see [`crate::ownership`]).
    pub fn upstream_ids(&self) -> &UpstreamIds {
        &self.upstream_ids
    }

    /// A token that is the same each time *this* step is repeated and
    /// different for every other step: use it as an upstream idempotency key.
    pub fn idempotency_key(&self) -> String {
        format!("{}-{}", self.task_id, self.step)
    }
}

/// The work behind one tool.
pub trait Job: Send + Sync + 'static {
    /// The tool's arguments; their JSON Schema is the tool's `inputSchema`.
    type Args: DeserializeOwned + JsonSchema + Send + 'static;
    /// The checkpoint saved between steps.
    type State: Serialize + DeserializeOwned + Send + 'static;

    /// The first step, from the call's arguments.
    fn start(
        &self,
        args: Self::Args,
        cx: &JobContext,
    ) -> impl Future<Output = StepResult<Self::State>> + Send;

    /// Every later step, from the last checkpoint: after a wait, or once
    /// the client answered every question.
    fn resume(
        &self,
        state: Self::State,
        event: Event,
        cx: &JobContext,
    ) -> impl Future<Output = StepResult<Self::State>> + Send;

    /// A cancel was requested. By default the task simply ends `cancelled`;
    /// override to clean up upstream first.
    fn cancel(
        &self,
        state: Self::State,
        cx: &JobContext,
    ) -> impl Future<Output = StepResult<Self::State>> + Send {
        let _ = (state, cx);
        std::future::ready(Ok(Step::cancelled()))
    }
}

/// What the engine hands a tool's job for one step, its types erased to
/// JSON. Backends never build one; the engine does, from the stored task.
#[derive(Debug, Clone)]
pub enum Input {
    /// The first step, with the tool's arguments.
    Start(Value),
    /// A later step, with the checkpoint and why it runs.
    Resume(Value, Event),
    /// A cancel was requested; with the checkpoint.
    Cancel(Value),
}

/// A [`Job`] with its types erased to JSON, so one registry holds them all.
trait DynJob: Send + Sync {
    fn step<'a>(&'a self, input: Input, cx: &'a JobContext) -> BoxFuture<'a, StepResult<Value>>;
    fn check_args(&self, args: &JsonObject) -> Result<(), String>;
}

impl<J: Job> DynJob for J {
    fn step<'a>(&'a self, input: Input, cx: &'a JobContext) -> BoxFuture<'a, StepResult<Value>> {
        Box::pin(async move {
            let step = match input {
                Input::Start(args) => {
                    let args = decode::<J::Args>(args, "arguments")?;
                    self.start(args, cx).await?
                }
                Input::Resume(state, event) => {
                    self.resume(decode(state, "checkpoint")?, event, cx).await?
                }
                Input::Cancel(state) => self.cancel(decode(state, "checkpoint")?, cx).await?,
            };
            step.try_map_state(|s| {
                serde_json::to_value(s).map_err(|e| {
                    JobError::Fatal(ErrorData::internal_error(
                        format!("job checkpoint does not serialize: {e}"),
                        None,
                    ))
                })
            })
        })
    }

    fn check_args(&self, args: &JsonObject) -> Result<(), String> {
        parse_args::<J::Args>(args).map(|_| ())
    }
}

impl<S> Step<S> {
    /// [`Step::Cancelled`] with the default status, "cancelled".
    pub fn cancelled() -> Self {
        Step::Cancelled { status: None }
    }

    /// [`Step::Cancelled`] saying what the upstream still does.
    pub fn cancelled_saying(status: impl Into<String>) -> Self {
        Step::Cancelled {
            status: Some(status.into()),
        }
    }

    fn try_map_state<T, E>(self, f: impl FnOnce(S) -> Result<T, E>) -> Result<Step<T>, E> {
        Ok(match self {
            Step::Done(r) => Step::Done(r),
            Step::Fail(e) => Step::Fail(e),
            Step::Cancelled { status } => Step::Cancelled { status },
            Step::Wait {
                state,
                status,
                after,
            } => Step::Wait {
                state: f(state)?,
                status,
                after,
            },
            Step::Ask {
                state,
                status,
                requests,
            } => Step::Ask {
                state: f(state)?,
                status,
                requests,
            },
        })
    }
}

fn decode<T: DeserializeOwned>(value: Value, what: &str) -> Result<T, JobError> {
    serde_json::from_value(value).map_err(|e| {
        JobError::Fatal(ErrorData::internal_error(
            format!("stored {what} no longer match this job: {e}"),
            None,
        ))
    })
}

/// Parses tool arguments, naming the offending field in the error.
pub fn parse_args<T: DeserializeOwned>(args: &JsonObject) -> Result<T, String> {
    let value = Value::Object(args.clone());
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        if path == "." || path.is_empty() {
            e.into_inner().to_string()
        } else {
            format!("field `{path}`: {}", e.into_inner())
        }
    })
}

/// A registered tool: its MCP definition, policy and job.
#[derive(Clone)]
pub struct ToolSpec {
    /// The tool as `tools/list` shows it.
    pub tool: rmcp::model::Tool,
    /// Its lifetime, polling, timeout and retry policy.
    pub policy: ToolPolicy,
    job: Arc<dyn DynJob>,
    sync_view: Option<Arc<dyn SyncView>>,
}

impl std::fmt::Debug for ToolSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolSpec")
            .field("name", &self.tool.name)
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

impl ToolSpec {
    /// A tool whose `inputSchema` is derived from the job's `Args`. Names
    /// may be built at run time (one tool per skill of a remote agent).
    pub fn new<J: Job>(
        name: impl Into<Cow<'static, str>>,
        description: impl Into<Cow<'static, str>>,
        policy: ToolPolicy,
        job: J,
    ) -> Self {
        let schema = input_schema::<J::Args>();
        Self {
            tool: rmcp::model::Tool::new(name, description, schema),
            policy,
            job: Arc::new(job),
            sync_view: None,
        }
    }

    /// Replaces the MCP tool definition (to add an output schema, annotations
    /// or an upstream-compatible input schema).
    pub fn with_tool(mut self, tool: rmcp::model::Tool) -> Self {
        self.tool = tool;
        self
    }

    /// Answers clients without the tasks extension with `view` instead of
    /// waiting up to the sync budget.
    pub fn with_sync_view(mut self, view: impl SyncView) -> Self {
        self.sync_view = Some(Arc::new(view));
        self
    }

    /// Checks arguments before a task is created for them.
    pub fn check_args(&self, args: &JsonObject) -> Result<(), String> {
        self.job.check_args(args)
    }

    /// Runs one step of the tool's job (the engine's call).
    pub fn step<'a>(
        &'a self,
        input: Input,
        cx: &'a JobContext,
    ) -> BoxFuture<'a, StepResult<Value>> {
        self.job.step(input, cx)
    }

    /// The tool's answer for clients without the tasks extension, if it has
    /// its own (see [`SyncView`]).
    pub fn sync_view(&self) -> Option<&dyn SyncView> {
        self.sync_view.as_deref()
    }
}

/// The JSON Schema (draft 2020-12, as MCP asks) of what `T` deserializes
/// from: a tool's `inputSchema`.
pub fn input_schema<T: JsonSchema>() -> Arc<JsonObject> {
    let schema = schemars::generate::SchemaSettings::draft2020_12()
        .into_generator()
        .into_root_schema_for::<T>();
    match serde_json::to_value(schema) {
        Ok(Value::Object(map)) => Arc::new(map),
        // A derived schema is always an object; an empty one accepts anything.
        _ => Arc::new(JsonObject::new()),
    }
}
