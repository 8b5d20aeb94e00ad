//! The scripted agents, one per skill of the Agent Card, each a short async script
//! over the task store.
//!
//! **Selection** (first that applies): the string `skill` in the message's
//! `metadata`, then in the request's `metadata`; else the first word of the message's
//! text when it is a skill id (`long-running do the thing`); else `quick-answer`. An
//! unknown `skill` in metadata is refused with -32602 naming the field.
//!
//! | skill | what the task does |
//! |---|---|
//! | `quick-answer` | WORKING, one artifact `answer` with a text, a data and a file (raw) part, COMPLETED |
//! | `direct-message` | no task: the answer is a `Message` (SendMessageResponse.message) |
//! | `ask-input` | INPUT_REQUIRED asking a name; the next message in the task (same taskId) gets artifact `greeting`, COMPLETED |
//! | `needs-auth` | AUTH_REQUIRED with a sign-in URL `{base}/auth/{taskId}` in the status message; a GET of it resumes the task to COMPLETED; messages sent meanwhile get a reminder |
//! | `long-running` | WORKING progress messages `step i/N` every `step_delay` (N = metadata `steps`, 1..=100, default 3), artifact `report`, COMPLETED; cancelable |
//! | `refuses-cancel` | like `long-running`, but CancelTask answers TaskNotCancelable (-32002) |
//! | `fails` | WORKING, then FAILED with a status message |
//! | `rejects` | REJECTED with a status message |

use std::time::Duration;

use base64::Engine as _;
use serde_json::{Map, Value, json};

use super::A2aSim;
use super::errors::RpcError;
use super::ids;
use super::store::AgentHandles;
use super::wire::{Artifact, Message, Part, TaskState};

/// The scripted agents (the card's skills).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Skill {
    /// Text, data and file artifact at once.
    QuickAnswer,
    /// A direct message, no task.
    DirectMessage,
    /// INPUT_REQUIRED round trip.
    AskInput,
    /// AUTH_REQUIRED with an out-of-band sign-in URL.
    NeedsAuth,
    /// Progress status messages, cancelable.
    LongRunning,
    /// Progress status messages, not cancelable.
    RefusesCancel,
    /// Ends FAILED.
    Fails,
    /// Ends REJECTED.
    Rejects,
}

impl Skill {
    /// Every skill, in the card's order.
    pub const ALL: [Skill; 8] = [
        Skill::QuickAnswer,
        Skill::DirectMessage,
        Skill::AskInput,
        Skill::NeedsAuth,
        Skill::LongRunning,
        Skill::RefusesCancel,
        Skill::Fails,
        Skill::Rejects,
    ];

    /// The skill id (card `skills[].id`, and what selects it).
    pub fn id(self) -> &'static str {
        match self {
            Skill::QuickAnswer => "quick-answer",
            Skill::DirectMessage => "direct-message",
            Skill::AskInput => "ask-input",
            Skill::NeedsAuth => "needs-auth",
            Skill::LongRunning => "long-running",
            Skill::RefusesCancel => "refuses-cancel",
            Skill::Fails => "fails",
            Skill::Rejects => "rejects",
        }
    }

    /// The card's `skills[].description`.
    pub fn description(self) -> &'static str {
        match self {
            Skill::QuickAnswer => {
                "Answers at once with an artifact holding a text, a JSON data and a text file part."
            }
            Skill::DirectMessage => "Answers with a direct message and creates no task.",
            Skill::AskInput => {
                "Asks for the caller's name (INPUT_REQUIRED) and greets them when answered in the same task."
            }
            Skill::NeedsAuth => {
                "Needs a sign-in (AUTH_REQUIRED, URL in the status message) and finishes once it happened."
            }
            Skill::LongRunning => {
                "Works for a while, reporting progress status messages; can be canceled."
            }
            Skill::RefusesCancel => {
                "Works for a while, reporting progress; refuses cancellation (TaskNotCancelable)."
            }
            Skill::Fails => "Starts, then fails (TASK_STATE_FAILED).",
            Skill::Rejects => "Rejects every request (TASK_STATE_REJECTED).",
        }
    }

    /// The skill with this id.
    pub fn from_id(id: &str) -> Option<Skill> {
        Skill::ALL.into_iter().find(|s| s.id() == id)
    }

    /// Whether CancelTask may cancel its tasks.
    pub fn cancelable(self) -> bool {
        self != Skill::RefusesCancel
    }
}

/// Chooses the scripted agent for a new message (the module docs say how).
pub(crate) fn select(
    message: &Message,
    request_metadata: Option<&Map<String, Value>>,
) -> Result<Skill, RpcError> {
    for (field, metadata) in [
        ("message.metadata.skill", message.metadata.as_ref()),
        ("metadata.skill", request_metadata),
    ] {
        if let Some(value) = metadata.and_then(|m| m.get("skill")) {
            let id = value.as_str().unwrap_or_default();
            return Skill::from_id(id).ok_or_else(|| {
                RpcError::invalid_params(
                    field,
                    format!(
                        "unknown skill {value}; the card's skills are {}",
                        Skill::ALL.map(Skill::id).join(", ")
                    ),
                )
            });
        }
    }
    let text = message.text();
    let first_word = text.split_whitespace().next().unwrap_or_default();
    Ok(Skill::from_id(first_word).unwrap_or(Skill::QuickAnswer))
}

/// The number of progress steps a long-running task takes (metadata `steps`).
pub(crate) fn steps(message: &Message) -> Result<u64, RpcError> {
    match message.metadata.as_ref().and_then(|m| m.get("steps")) {
        None => Ok(3),
        // ProtoJSON carries Struct numbers as doubles: `3.0` is as good as `3`.
        Some(value) => value
            .as_u64()
            .or_else(|| {
                let f = value.as_f64()?;
                #[expect(
                    clippy::cast_possible_truncation,
                    clippy::cast_sign_loss,
                    reason = "f is whole and between 1 and 100, so the cast is exact"
                )]
                (f.fract() == 0.0 && (1.0..=100.0).contains(&f)).then_some(f as u64)
            })
            .filter(|n| (1..=100).contains(n))
            .ok_or_else(|| {
                RpcError::invalid_params(
                    "message.metadata.steps",
                    format!("{value} is not a whole number from 1 to 100"),
                )
            }),
    }
}

/// What a task's script needs besides the store.
#[derive(Debug)]
pub(crate) struct Run {
    pub sim: A2aSim,
    pub skill: Skill,
    pub task_id: String,
    pub first_text: String,
    pub steps: u64,
    /// Where the sign-in page is (`needs-auth`).
    pub base_url: String,
    pub handles: AgentHandles,
}

impl Run {
    fn status(&self, state: TaskState, text: impl Into<String>) -> bool {
        self.sim
            .inner
            .store()
            .set_status(&self.task_id, state, Some(text.into()))
    }

    fn artifact(&self, name: &str, parts: Vec<Part>) -> bool {
        self.sim.inner.store().add_artifact(
            &self.task_id,
            Artifact {
                artifact_id: ids::new_id(),
                name: name.to_owned(),
                description: String::new(),
                parts,
            },
        )
    }

    /// Waits `delay`; false when the task was canceled (or ended) meanwhile.
    async fn pause(&self, delay: Duration) -> bool {
        tokio::select! {
            () = self.handles.cancel.cancelled() => false,
            () = tokio::time::sleep(delay) => true,
        }
    }

    /// Plays the skill's script. Each step stops the script once the task is terminal
    /// (canceled): the store refuses changes to terminal tasks.
    pub(super) async fn play(mut self) {
        let step_delay = self.sim.inner.config.step_delay;
        match self.skill {
            Skill::QuickAnswer => {
                let _ = self.status(TaskState::Working, "Looking it up.")
                    && self.artifact("answer", answer_parts(&self.first_text))
                    && self.status(TaskState::Completed, "Done.");
            }
            Skill::AskInput => {
                if !self.status(
                    TaskState::InputRequired,
                    "What is your name? Reply in this task (same taskId).",
                ) {
                    return;
                }
                let reply = tokio::select! {
                    () = self.handles.cancel.cancelled() => return,
                    reply = self.handles.inbox.recv() => reply,
                };
                let Some(reply) = reply else { return };
                let _ = self.artifact(
                    "greeting",
                    vec![Part::text(format!("Hello, {}!", reply.text().trim()))],
                ) && self.status(TaskState::Completed, "Greeted.");
            }
            Skill::NeedsAuth => {
                let url = format!("{}/auth/{}", self.base_url, self.task_id);
                if !self.status(
                    TaskState::AuthRequired,
                    format!("Sign in at {url} to let me read your calendar."),
                ) {
                    return;
                }
                loop {
                    tokio::select! {
                        () = self.handles.cancel.cancelled() => return,
                        () = self.handles.signed_in.notified() => break,
                        message = self.handles.inbox.recv() => {
                            if message.is_none() { return; }
                            if !self.status(
                                TaskState::AuthRequired,
                                format!("Still waiting for the sign-in at {url}."),
                            ) { return; }
                        }
                    }
                }
                let _ = self.status(TaskState::Working, "Signed in; reading the calendar.")
                    && self.artifact(
                        "calendar",
                        vec![Part {
                            data: Some(json!({ "meetings": 2, "next": "Design review" })),
                            media_type: "application/json".into(),
                            ..Part::default()
                        }],
                    )
                    && self.status(TaskState::Completed, "Done.");
            }
            Skill::LongRunning | Skill::RefusesCancel => {
                if !self.status(
                    TaskState::Working,
                    format!("Starting {} steps.", self.steps),
                ) {
                    return;
                }
                for step in 1..=self.steps {
                    if !self.pause(step_delay).await
                        || !self.status(TaskState::Working, format!("step {step}/{}", self.steps))
                    {
                        return;
                    }
                }
                let _ = self.artifact(
                    "report",
                    vec![Part::text(format!("Finished {} steps.", self.steps))],
                ) && self.status(TaskState::Completed, "Done.");
            }
            Skill::Fails => {
                let _ = self.status(TaskState::Working, "Trying.")
                    && self.status(
                        TaskState::Failed,
                        "Simulated failure: the downstream service answered 500.",
                    );
            }
            Skill::Rejects => {
                let _ = self.status(TaskState::Rejected, "I do not take requests like this one.");
            }
            // Answered without a task by `send`; never spawned.
            Skill::DirectMessage => {}
        }
    }
}

/// The direct answer of `direct-message`.
pub(crate) fn direct_reply(context_id: &str, question: &str) -> Message {
    let mut reply = Message::agent("", context_id, format!("You said: {}", question.trim()));
    reply.task_id.clear();
    reply
}

/// The `quick-answer` artifact: the three kinds of content a backend must map.
fn answer_parts(question: &str) -> Vec<Part> {
    let file = format!("Question: {}\nAnswer: 42\n", question.trim());
    vec![
        Part::text("The answer is 42."),
        Part {
            data: Some(json!({ "answer": 42, "confidence": 0.9 })),
            media_type: "application/json".into(),
            ..Part::default()
        },
        Part {
            raw: Some(base64::engine::general_purpose::STANDARD.encode(file)),
            filename: "answer.txt".into(),
            media_type: "text/plain".into(),
            ..Part::default()
        },
    ]
}
