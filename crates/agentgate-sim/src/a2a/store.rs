//! The task store and state machine: every task's current [`Task`] snapshot, the
//! broadcast channel its events go out on, and the handles its agent listens to
//! (inbox for follow-up messages, cancel token, out-of-band sign-in).
//!
//! Every change goes through [`Store::set_status`] or [`Store::add_artifact`], which
//! update the snapshot and broadcast the event in one critical section, so a reader
//! that takes a snapshot and subscribes under the same lock sees every later event
//! exactly once (the Task-first rule of §3.1.6). A terminal task takes no more
//! changes: an agent still running after a cancel learns it from their `false`.

use std::collections::HashMap;
use std::sync::Arc;

use tokio::sync::{Notify, broadcast, mpsc};
use tokio_util::sync::CancellationToken;

use super::ids;
use super::wire::{
    Artifact, Message, StreamResponse, Task, TaskArtifactUpdateEvent, TaskPushNotificationConfig,
    TaskState, TaskStatus, TaskStatusUpdateEvent,
};

/// Events buffered per task for slow subscribers (a scripted run emits fewer than 20).
const EVENT_BUFFER: usize = 256;

/// One task and its agent's handles.
#[derive(Debug)]
pub(crate) struct LiveTask {
    pub task: Task,
    /// Store-wide sequence number of the last status change (ListTasks order).
    pub updated: u64,
    pub events: broadcast::Sender<StreamResponse>,
    pub inbox: mpsc::UnboundedSender<Message>,
    pub cancel: CancellationToken,
    pub signed_in: Arc<Notify>,
    /// Whether CancelTask may cancel it (false for the `refuses-cancel` agent).
    pub cancelable: bool,
    /// Its webhooks (push notification configs), each with an id.
    pub push: Vec<TaskPushNotificationConfig>,
}

/// What the agent of a new task listens to.
#[derive(Debug)]
pub(crate) struct AgentHandles {
    pub inbox: mpsc::UnboundedReceiver<Message>,
    pub cancel: CancellationToken,
    pub signed_in: Arc<Notify>,
}

/// What a messageId already produced (idempotency, see `send`).
#[derive(Clone, Debug)]
pub(crate) enum Prior {
    /// It created or continued this task.
    Task(String),
    /// It was answered directly with this message.
    Message(Message),
}

/// All tasks and the per-messageId record.
#[derive(Debug, Default)]
pub(crate) struct Store {
    pub tasks: HashMap<String, LiveTask>,
    pub by_message_id: HashMap<String, Prior>,
    /// Every contextId a task or reply was created in (for
    /// [`A2aConfig::accept_client_context_ids`](super::A2aConfig::accept_client_context_ids)).
    pub contexts: std::collections::HashSet<String>,
    pub stats: super::A2aStats,
    /// Access tokens issued by the OAuth token endpoint.
    pub tokens: crate::oauth::Tokens,
    sequence: u64,
}

impl Store {
    fn next_sequence(&mut self) -> u64 {
        self.sequence += 1;
        self.sequence
    }

    /// Stores a new task (its snapshot as given) and returns its agent's handles.
    pub(super) fn create(&mut self, task: Task, cancelable: bool) -> AgentHandles {
        let (events, _) = broadcast::channel(EVENT_BUFFER);
        let (inbox_tx, inbox) = mpsc::unbounded_channel();
        let cancel = CancellationToken::new();
        let signed_in = Arc::new(Notify::new());
        let updated = self.next_sequence();
        self.contexts.insert(task.context_id.clone());
        *self
            .stats
            .tasks_by_context_id
            .entry(task.context_id.clone())
            .or_default() += 1;
        self.tasks.insert(
            task.id.clone(),
            LiveTask {
                task,
                updated,
                events,
                inbox: inbox_tx,
                cancel: cancel.clone(),
                signed_in: signed_in.clone(),
                cancelable,
                push: Vec::new(),
            },
        );
        AgentHandles {
            inbox,
            cancel,
            signed_in,
        }
    }

    /// The snapshot and a subscription to every later event.
    pub(super) fn subscribe(
        &self,
        task_id: &str,
    ) -> Option<(Task, broadcast::Receiver<StreamResponse>)> {
        let record = self.tasks.get(task_id)?;
        Some((record.task.clone(), record.events.subscribe()))
    }

    /// Moves the task to `state`, with an agent message saying `text`. False, and nothing changes, when the task is unknown or terminal.
    pub(super) fn set_status(
        &mut self,
        task_id: &str,
        state: TaskState,
        text: Option<String>,
    ) -> bool {
        let sequence = self.next_sequence();
        let Some(record) = self.tasks.get_mut(task_id) else {
            return false;
        };
        if record.task.status.state.is_terminal() {
            return false;
        }
        let message = text.map(|text| Message::agent(task_id, &record.task.context_id, text));
        // The status message being replaced moves into the history (as the official
        // Python SDK's task manager does): the current one lives in `status` only.
        if let Some(previous) = record.task.status.message.take() {
            record.task.history.push(previous);
        }
        let status = TaskStatus {
            state,
            message,
            timestamp: ids::now(),
        };
        record.task.status = status.clone();
        record.updated = sequence;
        if state.is_terminal() {
            // Nothing will need the agent's handles again.
            record.cancel.cancel();
        }
        // No receiver is fine: nobody is streaming this task.
        let _ = record
            .events
            .send(StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
                task_id: task_id.to_owned(),
                context_id: record.task.context_id.clone(),
                status,
            }));
        true
    }

    /// Adds a whole artifact. False when the task is unknown or terminal.
    pub(super) fn add_artifact(&mut self, task_id: &str, artifact: Artifact) -> bool {
        let Some(record) = self.tasks.get_mut(task_id) else {
            return false;
        };
        if record.task.status.state.is_terminal() {
            return false;
        }
        record.task.artifacts.push(artifact.clone());
        let _ = record
            .events
            .send(StreamResponse::ArtifactUpdate(TaskArtifactUpdateEvent {
                task_id: task_id.to_owned(),
                context_id: record.task.context_id.clone(),
                artifact,
                last_chunk: true,
            }));
        true
    }
}
