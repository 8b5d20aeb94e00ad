//! An example agentgate backend, small enough to read in one sitting and
//! complete enough to copy: a "countdown agent" that works for a while
//! (reporting progress), asks the user a question, and answers.
//!
//! ```text
//! tools/call countdown {seconds: 3, ask: true}
//!   start   ─▶ Step::Wait "3 s left"      (checkpoint: the end time)
//!   resume  ─▶ Step::Wait "2 s left" …    (any instance may run each step)
//!   resume  ─▶ Step::Ask  "Who should I greet?"  ─▶ task is input_required
//!   answer  ─▶ resume(Event::Input) ─▶ Step::Done "Hello, Ada!"
//! tasks/cancel at any point ─▶ Job::cancel ─▶ Step::Cancelled
//! ```
//!
//! Run it on its own (embedded SQLite, stdio or HTTP):
//!
//! ```sh
//! cargo run -p agentgate-example-countdown -- --listen 127.0.0.1:8740
//! ```
//!
//! In `agentgate serve` it is one line of the binary's backend list
//! (`crates/agentgate/src/backends.rs`), compiled in only with the
//! binary's `example-countdown` feature (a normal build links no example),
//! and off unless the config file turns it on:
//!
//! ```toml
//! [countdown]
//! enabled = true
//! max_seconds = 600
//! ```
//!
//! `docs/backends/write-a-backend.md` explains each piece.

use std::time::Duration;

use agentgate_backend::{
    Backend, ConfiguredBackend, Event, Job, JobContext, Millis, PollPolicy, Step, StepResult,
    ToolPolicy, ToolSpec, UpstreamMetrics,
};
use rmcp::model::{
    CallToolResult, ContentBlock, ElicitRequest, ElicitRequestParams, InputRequest, InputRequests,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

/// The tool's name.
pub const TOOL: &str = "countdown";

/// The `[countdown]` table of the config file.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CountdownConfig {
    /// Longest countdown a caller may ask for, in seconds.
    pub max_seconds: u64,
}

impl Default for CountdownConfig {
    fn default() -> Self {
        Self { max_seconds: 600 }
    }
}

/// The backend: one tool, no background work.
#[derive(Debug, Clone)]
pub struct Countdown {
    config: CountdownConfig,
}

impl Countdown {
    pub fn new(config: CountdownConfig) -> Self {
        Self { config }
    }
}

impl ConfiguredBackend for Countdown {
    const NAME: &'static str = "countdown";
    type Config = CountdownConfig;
    /// An example: served only when `[countdown] enabled = true` says so.
    const ENABLED_BY_DEFAULT: bool = false;

    fn check_config(
        config: &CountdownConfig,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        if config.max_seconds == 0 {
            return Err("countdown.max_seconds must be at least 1".into());
        }
        Ok(())
    }

    async fn from_config(
        config: CountdownConfig,
        _upstream: UpstreamMetrics,
    ) -> Result<Self, Box<dyn std::error::Error + Send + Sync>> {
        Self::check_config(&config)?;
        Ok(Self::new(config))
    }
}

impl Backend for Countdown {
    fn setup(&self) -> agentgate_backend::Health {
        agentgate_backend::Health::Ready(format!(
            "the example backend, countdowns of up to {} s",
            self.config.max_seconds
        ))
    }

    fn tools(&self) -> Vec<ToolSpec> {
        let policy = ToolPolicy::default()
            .ttl(Some(Duration::from_secs(3600)))
            .poll(PollPolicy::fixed(Duration::from_secs(1)))
            // Clients without the tasks extension wait this long inline.
            .sync_budget(Duration::from_secs(5));
        vec![ToolSpec::new(
            TOOL,
            "Counts down `seconds` (reporting progress), then, if `ask` is true, asks who to \
             greet, and greets them. An example of a long-running agent.",
            policy,
            CountdownJob {
                max_seconds: self.config.max_seconds,
            },
        )]
    }
}

/// The tool's arguments; their JSON Schema is its `inputSchema`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CountdownArgs {
    /// Seconds to count down.
    pub seconds: u64,
    /// Ask who to greet at the end.
    #[serde(default)]
    pub ask: bool,
}

/// What is saved between steps: everything the next step needs.
#[derive(Debug, Serialize, Deserialize)]
pub struct CountdownState {
    /// When the countdown ends (Unix ms).
    ends_at: Millis,
    ask: bool,
}

/// The job behind the tool.
#[derive(Debug, Clone)]
pub struct CountdownJob {
    max_seconds: u64,
}

impl Job for CountdownJob {
    type Args = CountdownArgs;
    type State = CountdownState;

    async fn start(&self, args: CountdownArgs, cx: &JobContext) -> StepResult<CountdownState> {
        if args.seconds > self.max_seconds {
            // A tool error the caller can act on, not a protocol failure.
            return Ok(Step::Done(CallToolResult::error(vec![ContentBlock::text(
                format!(
                    "Error: field `seconds` is {}, at most {} is allowed (countdown.max_seconds)",
                    args.seconds, self.max_seconds
                ),
            )])));
        }
        let state = CountdownState {
            ends_at: cx.now.saturating_add(Duration::from_secs(args.seconds)),
            ask: args.ask,
        };
        self.resume(state, Event::Tick, cx).await
    }

    async fn resume(
        &self,
        state: CountdownState,
        event: Event,
        cx: &JobContext,
    ) -> StepResult<CountdownState> {
        if let Event::Input(responses) = event {
            let name = responses
                .get("who")
                .filter(|r| r["action"] == "accept")
                .and_then(|r| r["content"]["name"].as_str())
                .unwrap_or("whoever you are");
            return Ok(Step::Done(CallToolResult::success(vec![
                ContentBlock::text(format!("Hello, {name}!")),
            ])));
        }
        let left = state.ends_at.since(cx.now);
        if !left.is_zero() {
            let millis = u64::try_from(left.as_millis()).unwrap_or(u64::MAX);
            return Ok(Step::Wait {
                status: Some(format!("{} s left", millis.div_ceil(1000))),
                state,
                // Wake every second so the status message moves.
                after: left.min(Duration::from_secs(1)),
            });
        }
        if !state.ask {
            return Ok(Step::Done(CallToolResult::success(vec![
                ContentBlock::text("Done counting."),
            ])));
        }
        Ok(Step::Ask {
            state,
            status: Some("asking who to greet".to_owned()),
            requests: who_to_greet(),
        })
    }
}

/// One form elicitation: the name to greet. Keys must be unique for the
/// task's whole life; this job asks once.
fn who_to_greet() -> InputRequests {
    let schema = json!({
        "type": "object",
        "properties": {"name": {"type": "string", "description": "Who to greet"}},
        "required": ["name"]
    });
    let mut requests = InputRequests::new();
    if let Ok(requested_schema) = serde_json::from_value(schema) {
        requests.insert(
            "who".to_owned(),
            InputRequest::Elicitation(ElicitRequest::new(
                ElicitRequestParams::FormElicitationParams {
                    meta: None,
                    message: "Who should I greet?".to_owned(),
                    requested_schema,
                },
            )),
        );
    }
    requests
}
