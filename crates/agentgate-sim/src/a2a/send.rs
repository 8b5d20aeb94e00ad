//! SendMessage and SendStreamingMessage: checks the message, applies messageId
//! idempotency, starts a new task (spawning its scripted agent) or continues the task
//! the message names, and hands back the task snapshot with a subscription taken
//! under the same lock, so blocking calls and streams miss no event.

use base64::Engine as _;
use tokio::sync::broadcast;

use super::A2aSim;
use super::agents::{self, Run, Skill};
use super::errors::RpcError;
use super::ids;
use super::push;
use super::store::Prior;
use super::wire::{Message, Role, SendMessageRequest, StreamResponse, Task, TaskState, TaskStatus};

/// What a send produced.
#[derive(Debug)]
pub(crate) enum SendReply {
    /// A direct reply, no task.
    Message(Message),
    /// A task: its snapshot now and every later event.
    Task {
        snapshot: Task,
        events: broadcast::Receiver<StreamResponse>,
        /// Wait for a terminal or interrupted state before answering (§3.2.2).
        blocking: bool,
        history_length: Option<i32>,
    },
}

/// Checks what the proto's REQUIRED annotations and the Part oneof demand.
fn check_message(message: &Message) -> Result<(), RpcError> {
    if message.message_id.trim().is_empty() {
        return Err(RpcError::invalid_params(
            "message.messageId",
            "required; send a new UUID per message",
        ));
    }
    if message.role != Role::User {
        return Err(RpcError::invalid_params(
            "message.role",
            "a client's message must be ROLE_USER",
        ));
    }
    if message.parts.is_empty() {
        return Err(RpcError::invalid_params(
            "message.parts",
            "at least one part is required",
        ));
    }
    for (i, part) in message.parts.iter().enumerate() {
        if part.content_count() != 1 {
            return Err(RpcError::invalid_params(
                &format!("message.parts[{i}]"),
                "exactly one of text, raw, url, data must be set",
            ));
        }
        if let Some(raw) = &part.raw {
            base64::engine::general_purpose::STANDARD
                .decode(raw)
                .map_err(|e| {
                    RpcError::invalid_params(
                        &format!("message.parts[{i}].raw"),
                        format!("not standard base64: {e}"),
                    )
                })?;
        }
    }
    Ok(())
}

/// Applies one send (see the module docs).
pub(crate) async fn send_message(
    sim: &A2aSim,
    base_url: &str,
    request: SendMessageRequest,
) -> Result<SendReply, RpcError> {
    let configuration = request.configuration.clone().unwrap_or_default();
    let push_config = configuration.task_push_notification_config.clone();
    if let Some(config) = &push_config {
        if !sim.inner.config.push_notifications {
            return Err(RpcError::push_not_supported());
        }
        push::check(config, "configuration.taskPushNotificationConfig")?;
        // a2a.proto: "Task id should be empty when sending this configuration in a
        // SendMessage request" (the task it is for is the message's).
        if !config.task_id.is_empty() && config.task_id != request.message.task_id {
            return Err(RpcError::invalid_params(
                "configuration.taskPushNotificationConfig.taskId",
                "must be empty (or the message's taskId) in SendMessage",
            ));
        }
    }
    if let Some(n) = configuration.history_length.filter(|n| *n < 0) {
        return Err(RpcError::invalid_params(
            "configuration.historyLength",
            format!("{n} is negative"),
        ));
    }
    let mut message = request.message;
    check_message(&message)?;
    let blocking = !configuration.return_immediately;
    let history_length = configuration.history_length;
    let task_outcome = |snapshot, events| SendReply::Task {
        snapshot,
        events,
        blocking,
        history_length,
    };

    let mut store = sim.inner.store();
    *store
        .stats
        .sends_by_message_id
        .entry(message.message_id.clone())
        .or_default() += 1;

    // A messageId seen before: answer with what it produced, start nothing.
    let prior = if sim.inner.config.dedupe_message_ids {
        store.by_message_id.get(&message.message_id).cloned()
    } else {
        None
    };
    if let Some(prior) = prior {
        return match prior {
            Prior::Message(reply) => Ok(SendReply::Message(reply)),
            Prior::Task(task_id) => {
                let (snapshot, events) = store
                    .subscribe(&task_id)
                    .ok_or_else(|| RpcError::task_not_found(&task_id))?;
                Ok(task_outcome(snapshot, events))
            }
        };
    }

    // A message continuing a task.
    if !message.task_id.is_empty() {
        let task_id = message.task_id.clone();
        let record = store
            .tasks
            .get_mut(&task_id)
            .ok_or_else(|| RpcError::task_not_found(&task_id))?;
        let state = record.task.status.state;
        if state.is_terminal() {
            return Err(RpcError::unsupported(format!(
                "task {task_id} is in a terminal state and takes no more messages"
            )));
        }
        if !message.context_id.is_empty() && message.context_id != record.task.context_id {
            return Err(RpcError::invalid_params(
                "message.contextId",
                format!(
                    "task {task_id} belongs to context {}; send that or leave it out",
                    record.task.context_id
                ),
            ));
        }
        if !state.is_interrupted() {
            return Err(RpcError::unsupported(format!(
                "task {task_id} is not waiting for input; poll it with GetTask or SubscribeToTask"
            )));
        }
        message.context_id = record.task.context_id.clone();
        // Attached before the agent hears the message, so its webhook misses nothing.
        let attached = push_config
            .map(|config| push::attach(&mut store, &task_id, config))
            .transpose()?;
        if state == TaskState::InputRequired {
            // First, so that the question moves into the history before the answer.
            store.set_status(&task_id, TaskState::Working, None);
        }
        let record = store
            .tasks
            .get_mut(&task_id)
            .ok_or_else(|| RpcError::task_not_found(&task_id))?;
        record.task.history.push(message.clone());
        // The agent gets it; a closed inbox means the script is gone, which a
        // non-terminal interrupted task never has.
        let _ = record.inbox.send(message.clone());
        record_effect(
            &mut store,
            &message.message_id,
            Prior::Task(task_id.clone()),
        );
        let (snapshot, events) = store
            .subscribe(&task_id)
            .ok_or_else(|| RpcError::task_not_found(&task_id))?;
        drop(store);
        if let Some(attached) = attached {
            push::start(sim, attached);
        }
        return Ok(task_outcome(snapshot, events));
    }

    // A new message: a direct reply or a new task.
    let skill = agents::select(&message, request.metadata.as_ref())?;
    let steps = agents::steps(&message)?;
    if message.context_id.is_empty() {
        message.context_id = ids::new_id();
    } else if !sim.inner.config.accept_client_context_ids
        && !store.contexts.contains(&message.context_id)
    {
        // §3.4.1: an agent that cannot accept a client-provided contextId MUST reject
        // the request (and MUST NOT make up another one).
        return Err(RpcError::invalid_params(
            "message.contextId",
            format!(
                "{:?} is not a context of this agent, which does not accept contextIds chosen \
                 by clients; leave it out to start a new context",
                message.context_id
            ),
        ));
    }
    if skill == Skill::DirectMessage {
        store.contexts.insert(message.context_id.clone());
        let reply = agents::direct_reply(&message.context_id, &message.text());
        record_effect(
            &mut store,
            &message.message_id,
            Prior::Message(reply.clone()),
        );
        return Ok(SendReply::Message(reply));
    }
    let task_id = ids::new_id();
    message.task_id = task_id.clone();
    let task = Task {
        id: task_id.clone(),
        context_id: message.context_id.clone(),
        status: TaskStatus {
            state: TaskState::Submitted,
            message: None,
            timestamp: ids::now(),
        },
        artifacts: Vec::new(),
        history: vec![message.clone()],
    };
    let handles = store.create(task, skill.cancelable());
    record_effect(
        &mut store,
        &message.message_id,
        Prior::Task(task_id.clone()),
    );
    // Before the agent runs, so its webhook misses none of its updates.
    let attached = push_config
        .map(|config| push::attach(&mut store, &task_id, config))
        .transpose()?;
    let (snapshot, events) = store
        .subscribe(&task_id)
        .ok_or_else(|| RpcError::task_not_found(&task_id))?;
    drop(store);
    if let Some(attached) = attached {
        push::start(sim, attached);
    }
    tokio::spawn(
        Run {
            sim: sim.clone(),
            skill,
            task_id,
            first_text: message.text(),
            steps,
            base_url: base_url.to_owned(),
            handles,
        }
        .play(),
    );
    Ok(task_outcome(snapshot, events))
}

fn record_effect(store: &mut super::store::Store, message_id: &str, prior: Prior) {
    store.by_message_id.insert(message_id.to_owned(), prior);
    *store
        .stats
        .effects_by_message_id
        .entry(message_id.to_owned())
        .or_default() += 1;
}

/// Waits until the task is terminal or interrupted, then returns it as it is.
pub(crate) async fn settled(
    sim: &A2aSim,
    snapshot: Task,
    mut events: broadcast::Receiver<StreamResponse>,
) -> Task {
    let settles = |state: TaskState| state.is_terminal() || state.is_interrupted();
    let task_id = snapshot.id.clone();
    if !settles(snapshot.status.state) {
        loop {
            match events.recv().await {
                Ok(StreamResponse::StatusUpdate(update)) if settles(update.status.state) => break,
                Ok(_) => {}
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    let state = sim
                        .inner
                        .store()
                        .tasks
                        .get(&task_id)
                        .map(|r| r.task.status.state);
                    if state.is_none_or(settles) {
                        break;
                    }
                }
                Err(broadcast::error::RecvError::Closed) => break,
            }
        }
    }
    sim.inner
        .store()
        .tasks
        .get(&task_id)
        .map_or(snapshot, |r| r.task.clone())
}
