//! Push notifications (§3.1.7–§3.1.10, §4.3, §13.2): the push-config methods and the
//! delivery of a task's updates to each of its webhooks.
//!
//! ```text
//! SendMessage(configuration.taskPushNotificationConfig) ─┐
//! CreateTaskPushNotificationConfig ──────────────────────┴▶ record.push += config (id assigned)
//!                                                          └▶ deliver(): one loop per config,
//!    subscribed to the task's events under the store lock (nothing missed):
//!    each StatusUpdate / ArtifactUpdate ─▶ POST {url}  Content-Type: application/a2a+json
//!                                              Authorization: {scheme} {credentials}
//!                                              X-A2A-Notification-Token: {token}  (if set)
//!                                              body: the StreamResponse (§4.3.3)
//!    in order; a failed POST (no answer, non-2xx) is retried with exponential backoff
//!    (§13.2 SHOULD), then given up; the loop ends after a terminal state or a delete.
//! ```
//!
//! Where the specification is open: the `token` field is sent as
//! `X-A2A-Notification-Token`, the header the official Python SDK uses (the spec names
//! none); webhook URLs are not screened for private addresses (§13.2 says SHOULD; the
//! emulator runs on loopback and its clients do too, as the SDK's default validator
//! does not screen either); a lagging loop sends a `task` snapshot in place of the
//! events it missed.

use std::time::Duration;

use serde_json::Value;
use tokio::sync::broadcast;

use super::A2aSim;
use super::errors::RpcError;
use super::ids;
use super::store::Store;
use super::wire::{
    ListPushConfigsRequest, ListPushConfigsResponse, PushConfigIdRequest, StreamResponse,
    TaskPushNotificationConfig,
};

/// How often one notification is tried before it is given up.
const ATTEMPTS: u32 = 4;
/// The first retry's wait; it doubles each time.
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
/// One POST's limit (§13.2: 10–30 s recommended).
pub(crate) const TIMEOUT: Duration = Duration::from_secs(10);

/// The header the official SDK sends `TaskPushNotificationConfig.token` in.
pub const NOTIFICATION_TOKEN_HEADER: &str = "X-A2A-Notification-Token";

/// Checks a config from a request; `field` names where it came from.
pub(crate) fn check(config: &TaskPushNotificationConfig, field: &str) -> Result<(), RpcError> {
    let url = url_ok(&config.url);
    if !url {
        return Err(RpcError::invalid_params(
            &format!("{field}.url"),
            format!("{:?} is not an absolute http(s) URL", config.url),
        ));
    }
    if let Some(auth) = &config.authentication
        && auth.scheme.trim().is_empty()
    {
        return Err(RpcError::invalid_params(
            &format!("{field}.authentication.scheme"),
            "required (e.g. \"Bearer\")",
        ));
    }
    Ok(())
}

fn url_ok(url: &str) -> bool {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"));
    rest.is_some_and(|r| !r.is_empty() && !r.starts_with('/'))
}

/// Adds `config` to task `task_id` and starts delivering its events. The caller
/// checked the config and that push notifications are on.
pub(crate) fn add(
    sim: &A2aSim,
    task_id: &str,
    config: TaskPushNotificationConfig,
) -> Result<TaskPushNotificationConfig, RpcError> {
    let attached = attach(&mut sim.inner.store(), task_id, config)?;
    Ok(start(sim, attached))
}

/// A config attached to its task, with the subscription its delivery reads (none
/// for an ended task).
pub(crate) type Attached = (
    TaskPushNotificationConfig,
    Option<broadcast::Receiver<StreamResponse>>,
);

/// Adds `config` to task `task_id` under the store lock the caller holds, so the
/// subscription misses no later event; [`start`] then delivers them.
pub(crate) fn attach(
    store: &mut Store,
    task_id: &str,
    mut config: TaskPushNotificationConfig,
) -> Result<Attached, RpcError> {
    let record = store
        .tasks
        .get_mut(task_id)
        .ok_or_else(|| RpcError::task_not_found(task_id))?;
    if config.id.is_empty() {
        config.id = ids::new_id();
    }
    config.task_id = task_id.to_owned();
    record.push.retain(|c| c.id != config.id);
    record.push.push(config.clone());
    // An ended task has nothing left to deliver.
    let events = (!record.task.status.state.is_terminal()).then(|| record.events.subscribe());
    Ok((config, events))
}

/// Starts the delivery loop of an attached config; returns the config.
pub(crate) fn start(sim: &A2aSim, (config, events): Attached) -> TaskPushNotificationConfig {
    if let Some(events) = events {
        tokio::spawn(deliver(sim.clone(), config.clone(), events));
    }
    config
}

/// Whether this event is the last one a webhook gets.
fn ends_delivery(event: &StreamResponse) -> bool {
    match event {
        StreamResponse::Task(task) => task.status.state.is_terminal(),
        StreamResponse::StatusUpdate(update) => update.status.state.is_terminal(),
        StreamResponse::Message(_) | StreamResponse::ArtifactUpdate(_) => false,
    }
}

/// The delivery loop of one config.
async fn deliver(
    sim: A2aSim,
    config: TaskPushNotificationConfig,
    mut events: broadcast::Receiver<StreamResponse>,
) {
    loop {
        let event = match events.recv().await {
            Ok(event) => event,
            Err(broadcast::error::RecvError::Lagged(_)) => {
                let snapshot = sim
                    .inner
                    .store()
                    .tasks
                    .get(&config.task_id)
                    .map(|r| r.task.clone());
                match snapshot {
                    Some(task) => StreamResponse::Task(task),
                    None => return,
                }
            }
            Err(broadcast::error::RecvError::Closed) => return,
        };
        let configured = sim
            .inner
            .store()
            .tasks
            .get(&config.task_id)
            .is_some_and(|r| r.push.iter().any(|c| c.id == config.id));
        if !configured {
            return;
        }
        let last = ends_delivery(&event);
        if sim.faults().take_push_drop() {
            sim.inner.store().stats.pushes_dropped += 1;
        } else {
            post(&sim, &config, &event).await;
        }
        if last {
            return;
        }
    }
}

/// POSTs one notification, retrying; counts the outcome.
async fn post(sim: &A2aSim, config: &TaskPushNotificationConfig, event: &StreamResponse) {
    let body = match serde_json::to_vec(event) {
        Ok(body) => body,
        Err(_) => return,
    };
    let mut backoff = FIRST_BACKOFF;
    for attempt in 1..=ATTEMPTS {
        sim.inner.store().stats.push_attempts += 1;
        let mut request = sim
            .inner
            .http
            .post(&config.url)
            .header("content-type", "application/a2a+json")
            .body(body.clone());
        if let Some(auth) = &config.authentication
            && !auth.credentials.is_empty()
        {
            request = request.header(
                "authorization",
                format!("{} {}", auth.scheme, auth.credentials),
            );
        }
        if !config.token.is_empty() {
            request = request.header(NOTIFICATION_TOKEN_HEADER, &config.token);
        }
        let delivered = request.send().await.is_ok_and(|r| r.status().is_success());
        if delivered {
            sim.inner.store().stats.pushes_delivered += 1;
            return;
        }
        if attempt < ATTEMPTS {
            tokio::time::sleep(backoff).await;
            backoff *= 2;
        }
    }
    sim.inner.store().stats.pushes_failed += 1;
    tracing::info!(url = %config.url, "push notification given up");
}

fn to_value(value: impl serde::Serialize) -> Result<Value, RpcError> {
    serde_json::to_value(value).map_err(|e| RpcError::internal(e.to_string()))
}

/// CreateTaskPushNotificationConfig.
pub(crate) fn create(sim: &A2aSim, config: TaskPushNotificationConfig) -> Result<Value, RpcError> {
    if config.task_id.is_empty() {
        return Err(RpcError::invalid_params("taskId", "required"));
    }
    check(&config, "params")?;
    let task_id = config.task_id.clone();
    to_value(add(sim, &task_id, config)?)
}

/// GetTaskPushNotificationConfig.
pub(crate) fn get(sim: &A2aSim, request: PushConfigIdRequest) -> Result<Value, RpcError> {
    let store = sim.inner.store();
    let record = store
        .tasks
        .get(&request.task_id)
        .ok_or_else(|| RpcError::task_not_found(&request.task_id))?;
    let config = record
        .push
        .iter()
        .find(|c| c.id == request.id)
        .ok_or_else(|| RpcError::task_not_found(&request.task_id))?;
    to_value(config)
}

/// ListTaskPushNotificationConfigs.
pub(crate) fn list(sim: &A2aSim, request: ListPushConfigsRequest) -> Result<Value, RpcError> {
    let store = sim.inner.store();
    let record = store
        .tasks
        .get(&request.task_id)
        .ok_or_else(|| RpcError::task_not_found(&request.task_id))?;
    to_value(ListPushConfigsResponse {
        configs: record.push.clone(),
        next_page_token: String::new(),
    })
}

/// DeleteTaskPushNotificationConfig: idempotent (§3.1.10); answers `{}`
/// (`google.protobuf.Empty`).
pub(crate) fn delete(sim: &A2aSim, request: PushConfigIdRequest) -> Result<Value, RpcError> {
    let mut store = sim.inner.store();
    let record = store
        .tasks
        .get_mut(&request.task_id)
        .ok_or_else(|| RpcError::task_not_found(&request.task_id))?;
    record.push.retain(|c| c.id != request.id);
    Ok(Value::Object(serde_json::Map::new()))
}
