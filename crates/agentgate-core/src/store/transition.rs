//! The state machine of a stored task: how a step's [`Outcome`] becomes the
//! task's next state. Every store calls [`apply`], so the rules live once.
//!
//! It also makes what is stored storable everywhere: PostgreSQL refuses
//! U+0000 in `text` and `jsonb`, so a NUL in any string (an upstream's
//! status text, a key, a result) is replaced by U+FFFD, the replacement
//! character, on every store alike. Left in, one such character made each
//! save fail, and the step that produced it ran again until the task's TTL.

use std::collections::BTreeMap;

use agentgate_backend::{Millis, Owner, TaskPhase};
use serde_json::Value;

use super::InputAck;
use crate::task::{NewTask, Outcome, TaskRecord};

/// What a NUL in stored text becomes: U+FFFD, which says that a character
/// was replaced, where dropping it silently would change the text unseen.
const NUL_REPLACEMENT: char = '\u{FFFD}';

/// `text` with every NUL replaced by [`NUL_REPLACEMENT`].
pub(crate) fn storable_text(text: &mut String) {
    if text.contains('\0') {
        *text = text.replace('\0', &NUL_REPLACEMENT.to_string());
    }
}

/// `text` as stored: itself, or a copy with every NUL replaced. For keys
/// (upstream ids): two ids that differ only by a NUL and a U+FFFD share a
/// binding, so the later one is refused as another principal's, never let
/// through.
pub(crate) fn storable_str(text: &str) -> std::borrow::Cow<'_, str> {
    if text.contains('\0') {
        std::borrow::Cow::Owned(text.replace('\0', &NUL_REPLACEMENT.to_string()))
    } else {
        std::borrow::Cow::Borrowed(text)
    }
}

/// Replaces every NUL in `value`'s strings and object keys.
pub(crate) fn storable_json(value: &mut Value) {
    match value {
        Value::String(text) => storable_text(text),
        Value::Array(items) => items.iter_mut().for_each(storable_json),
        Value::Object(map) => {
            if map.keys().any(|key| key.contains('\0')) {
                // Keys cannot be changed in place: rebuild the map (in its
                // order; two keys that differ only by a NUL and U+FFFD keep
                // the later value).
                *map = std::mem::take(map)
                    .into_iter()
                    .map(|(mut key, value)| {
                        storable_text(&mut key);
                        (key, value)
                    })
                    .collect();
            }
            map.values_mut().for_each(storable_json);
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// Replaces every NUL in the keys and values of `map`.
fn storable_map(map: &mut BTreeMap<String, Value>) {
    if map.keys().any(|key| key.contains('\0')) {
        *map = std::mem::take(map)
            .into_iter()
            .map(|(mut key, value)| {
                storable_text(&mut key);
                (key, value)
            })
            .collect();
    }
    map.values_mut().for_each(storable_json);
}

/// Replaces every NUL in the text a step's outcome would store.
pub(crate) fn storable_outcome(outcome: &mut Outcome) {
    match outcome {
        Outcome::Completed { result } => storable_json(result),
        Outcome::Failed { error } => storable_json(error),
        Outcome::Waiting {
            state,
            status_message,
            ..
        } => {
            storable_json(state);
            status_message.iter_mut().for_each(storable_text);
        }
        Outcome::InputRequired {
            state,
            status_message,
            requests,
        } => {
            storable_json(state);
            status_message.iter_mut().for_each(storable_text);
            storable_map(requests);
        }
        Outcome::Retry { status_message, .. } => status_message.iter_mut().for_each(storable_text),
        Outcome::Cancelled { status_message } => status_message.iter_mut().for_each(storable_text),
        Outcome::Interrupted => {}
    }
}

/// Replaces every NUL in the text a new task would store.
pub(crate) fn storable_new_task(task: &mut NewTask) {
    storable_json(&mut task.args);
    task.status_message.iter_mut().for_each(storable_text);
}

/// Whether `owner` may see the task at `now`: another owner's or an expired
/// task looks exactly like an unknown id.
pub(crate) fn visible(record: &TaskRecord, owner: &Owner, now: Millis) -> bool {
    &record.owner == owner && !record.is_expired(now)
}

/// Moves answers for outstanding keys from `responses` into the task;
/// unknown or already answered keys are ignored.
pub(crate) fn accept_input(
    task: &mut TaskRecord,
    mut responses: BTreeMap<String, Value>,
    now: Millis,
) -> InputAck {
    storable_map(&mut responses);
    let mut accepted = Vec::new();
    for (key, value) in responses {
        if task.input_requests.remove(&key).is_some() {
            task.input_responses.insert(key.clone(), value);
            accepted.push(key);
        }
    }
    if !accepted.is_empty() {
        // An answer is progress: the person is there.
        extend_ttl(task, now);
    }
    InputAck {
        accepted,
        complete: task.input_requests.is_empty(),
    }
}

/// Moves a task's expiry to its TTL after `now`: called for every change
/// that shows the work alive (see [`apply`]). An expired task stays expired:
/// its cancel is under way, and nothing brings its handle back.
fn extend_ttl(task: &mut TaskRecord, now: Millis) {
    if task.is_expired(now) {
        return;
    }
    if let Some(ttl) = task.ttl_ms {
        task.expires_at = Some(now.saturating_add(std::time::Duration::from_millis(ttl)));
    }
}

/// Turns a step's outcome into the task's next state. Shared by every store so
/// the transition rules live in one place.
///
/// A step that gets somewhere (a checkpoint, a question, an end) is
/// progress: the task's TTL starts again from `now`, so a live agent is
/// never expired by the clock alone, and an ended task's result is kept for
/// its TTL after it ended. A retried failure or an interruption is not.
pub(crate) fn apply(task: &mut TaskRecord, mut outcome: Outcome, now: Millis) {
    storable_outcome(&mut outcome);
    if outcome == Outcome::Interrupted {
        task.due_at = Some(now);
        return;
    }
    let expired = task.is_expired(now);
    if !matches!(outcome, Outcome::Retry { .. }) {
        extend_ttl(task, now);
    }
    task.updated_at = now;
    task.steps += 1;
    // Failures count in a row: any step that gets somewhere resets them.
    let failures_before = task.failures;
    task.failures = 0;
    match outcome {
        Outcome::Interrupted => {}
        // An ended task's message says how it ended; the last one of its
        // work ("waiting for a pull request") would no longer be true.
        Outcome::Completed { result } => {
            task.status = TaskPhase::Completed;
            let tool_error = result.get("isError") == Some(&Value::Bool(true));
            task.status_message = Some(
                if tool_error {
                    "done: the tool reported an error"
                } else {
                    "done"
                }
                .to_owned(),
            );
            task.result = Some(result);
            finish(task);
        }
        Outcome::Failed { error } => {
            task.status = TaskPhase::Failed;
            let reason = error.get("message").and_then(Value::as_str);
            task.status_message = Some(match reason {
                Some(reason) => format!("failed: {reason}"),
                None => "failed".to_owned(),
            });
            task.error = Some(error);
            finish(task);
        }
        Outcome::Cancelled { status_message } => {
            task.status = TaskPhase::Cancelled;
            task.status_message = Some(match (expired, status_message) {
                (true, Some(said)) => format!("{EXPIRED_AND_CANCELLED}; {said}"),
                (true, None) => EXPIRED_AND_CANCELLED.to_owned(),
                (false, Some(said)) => said,
                (false, None) => "cancelled".to_owned(),
            });
            finish(task);
        }
        Outcome::Waiting {
            state,
            status_message,
            due_at,
        } => {
            task.status = TaskPhase::Working;
            task.job_state = Some(state);
            task.status_message = status_message.or(task.status_message.take());
            task.input_responses.clear();
            task.due_at = Some(if task.cancel_requested { now } else { due_at });
        }
        Outcome::InputRequired {
            state,
            status_message,
            requests,
        } => {
            task.job_state = Some(state);
            task.status_message = status_message.or(task.status_message.take());
            task.input_responses.clear();
            let reused: Vec<_> = requests
                .keys()
                .filter(|k| task.used_input_keys.contains(k))
                .cloned()
                .collect();
            if !reused.is_empty() {
                // A job bug: keys must be unique for the task's lifetime, or a
                // late answer to the old request would be taken for the new one.
                task.status = TaskPhase::Failed;
                task.error = Some(crate::job::engine_failure(format!(
                    "job reused input keys {reused:?}; keys must be unique per task"
                )));
                finish(task);
                return;
            }
            task.used_input_keys.extend(requests.keys().cloned());
            task.input_requests = requests;
            task.status = TaskPhase::InputRequired;
            // A cancel that arrived while the step ran is delivered at once.
            task.due_at = task.cancel_requested.then_some(now);
        }
        Outcome::Retry {
            status_message,
            due_at,
        } => {
            task.steps -= 1;
            task.failures = failures_before.saturating_add(1);
            task.status = TaskPhase::Working;
            if status_message.is_some() {
                task.status_message = status_message;
            }
            task.due_at = Some(if task.cancel_requested { now } else { due_at });
        }
    }
}

/// The status message of a live task the sweeper found past its expiry,
/// while its backend's cancel runs (see `TaskStore::sweep`).
pub(crate) const EXPIRING: &str =
    "expired: no progress within its TTL; cancelling its upstream work";

/// The status message of such a task once its backend's cancel ran.
pub(crate) const EXPIRED_AND_CANCELLED: &str =
    "expired: no progress within its TTL; its upstream work was cancelled";

fn finish(task: &mut TaskRecord) {
    task.due_at = None;
    task.input_requests.clear();
    task.input_responses.clear();
}
