//! Push notifications (§3.1.7, §4.3): the webhook agents POST their task
//! updates to, and the per-task token that proves a notification came from
//! the agent it was given to.
//!
//! ```text
//! first SendMessage: configuration.taskPushNotificationConfig =
//!     { url: {push_url}/{our task id}, token: T, authentication: {Bearer, T} }
//!     T = base64url(HMAC-SHA256(push secret, "agentgate-a2a-push\0" + our task id))
//! agent ─POST {push_url}/{task}  Authorization: Bearer T ─▶ agentgate /hooks/a2a/{task}
//!     ─▶ PushHook: T checked (constant time) from the head, before the body
//!        is read (at most MAX_PUSH_BODY_BYTES); body a StreamResponse ─▶ nudge(task)
//!     ─▶ the task's next step reads the task with GetTask
//! ```
//!
//! The token is derived, not stored: every instance that shares the push
//! secret checks it, nothing secret reaches the store, and a repeated step
//! sends the same config. The notification's content is never trusted: it
//! only makes the task due, and the step reads the task itself. Nudges are
//! coalesced per task (at most one per `GAP`, the last of a burst delayed to
//! the end of the gap rather than dropped), so a flood of notifications
//! costs one read per `GAP`. A nudge the engine cannot take (a step is
//! running) is tried again shortly, a few times.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use agentgate_backend::{
    BoxFuture, TaskId, UpstreamMetrics, UpstreamOutcome, Webhook, WebhookRequest, WebhookResponse,
};
use base64::Engine as _;
use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::Sha256;

use crate::config::{PushSettings, Secret};
use crate::streams::Follower;
use crate::wire::{AuthenticationInfo, PushConfig};

/// The metrics operation of a notification received (outcome `ok`, or
/// `client_error` when refused).
pub const PUSH_OPERATION: &str = "PushNotification";

/// The header the official Python SDK sends `TaskPushNotificationConfig.token` in.
pub const NOTIFICATION_TOKEN_HEADER: &str = "x-a2a-notification-token";

/// The longest notification body read. A `StreamResponse` carries a task
/// (with its artifacts, at most) that the step reads again with GetTask
/// anyway: the body is only a nudge, and a stranger must not make the
/// server buffer megabytes.
pub const MAX_PUSH_BODY_BYTES: usize = 256 * 1024;

/// A task's nudges are this far apart at least.
const GAP: Duration = Duration::from_millis(250);
/// How often a nudge the task could not take is tried again.
const RENUDGES: u32 = 10;
const RENUDGE_AFTER: Duration = Duration::from_millis(300);
/// The coalescing map is pruned above this many tasks.
const MAX_REMEMBERED: usize = 10_000;

type HmacSha256 = Hmac<Sha256>;

fn mac(secret: &Secret, task: &str) -> HmacSha256 {
    // Any key length is valid for HMAC; `new_from_slice` cannot fail here.
    let mut mac = HmacSha256::new_from_slice(secret.expose().as_bytes())
        .unwrap_or_else(|_| unreachable!("HMAC takes keys of any length"));
    mac.update(b"agentgate-a2a-push\0");
    mac.update(task.as_bytes());
    mac
}

/// The token of `task`'s notifications.
pub fn token(secret: &Secret, task: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(mac(secret, task).finalize().into_bytes())
}

/// Whether `given` is `task`'s token (constant time).
fn valid(secret: &Secret, task: &str, given: &str) -> bool {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(given.trim())
        .is_ok_and(|bytes| mac(secret, task).verify_slice(&bytes).is_ok())
}

/// The push config of `task` for a SendMessage.
pub fn config(settings: &PushSettings, task: &TaskId) -> PushConfig {
    let token = token(&settings.secret, task.as_str());
    PushConfig {
        url: format!(
            "{}/{}",
            settings.base.as_str().trim_end_matches('/'),
            task.as_str()
        ),
        token: token.clone(),
        authentication: AuthenticationInfo {
            scheme: "Bearer".into(),
            credentials: token,
        },
    }
}

/// Counts of what the webhook saw, for tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PushStats {
    pub accepted: u64,
    pub refused: u64,
    pub nudges: u64,
}

/// The webhook at `/hooks/a2a/{task}`.
#[derive(Debug)]
pub struct PushHook {
    secret: Secret,
    follower: Arc<Follower>,
    metrics: UpstreamMetrics,
    state: Mutex<HookState>,
}

#[derive(Debug, Default)]
struct HookState {
    last: HashMap<String, Seen>,
    stats: PushStats,
}

/// When a task was last nudged, and whether another nudge is due.
#[derive(Debug, Clone, Copy)]
struct Seen {
    at: Instant,
    pending: bool,
}

impl PushHook {
    /// The webhook checking tokens made with `settings`' secret, nudging
    /// through `follower`'s handle, counting notifications in `metrics`.
    pub fn new(settings: &PushSettings, follower: Arc<Follower>, metrics: UpstreamMetrics) -> Self {
        Self {
            secret: settings.secret.clone(),
            follower,
            metrics,
            state: Mutex::new(HookState::default()),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, HookState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn stats(&self) -> PushStats {
        self.state().stats
    }

    fn refuse(&self, status: u16, why: &str) -> WebhookResponse {
        self.state().stats.refused += 1;
        self.metrics
            .record(PUSH_OPERATION, UpstreamOutcome::ClientError);
        WebhookResponse::new(status, format!("{why}\n"))
    }

    /// The refusal of a request whose token is missing or not its task's:
    /// from the path and headers alone, so the server asks before it reads
    /// the body.
    fn check_token(&self, request: &WebhookRequest) -> Option<WebhookResponse> {
        let task = request.path.trim_matches('/');
        // §4.3.3: the agent sends `authentication` as `Authorization`; the
        // official Python SDK also sends `token` in its own header.
        let given = request
            .header("authorization")
            .and_then(|h| {
                let (scheme, rest) = h.split_once(' ')?;
                scheme.eq_ignore_ascii_case("bearer").then_some(rest)
            })
            .or_else(|| request.header(NOTIFICATION_TOKEN_HEADER));
        // An unknown task and a wrong token are answered alike.
        let Some(given) = given else {
            return Some(self.refuse(401, "a push notification needs the task's bearer token"));
        };
        if task.is_empty() || task.contains('/') || !valid(&self.secret, task, given) {
            return Some(self.refuse(401, "wrong token for this task"));
        }
        None
    }

    async fn handle_request(self: Arc<Self>, request: WebhookRequest) -> WebhookResponse {
        if let Some(refusal) = self.check_token(&request) {
            return refusal;
        }
        let task = request.path.trim_matches('/').to_owned();
        let Ok(body) = serde_json::from_slice::<Value>(&request.body) else {
            return self.refuse(400, "the body is not JSON (a StreamResponse, §4.3.3)");
        };
        let members = ["task", "message", "statusUpdate", "artifactUpdate"]
            .iter()
            .filter(|m| body.get(**m).is_some())
            .count();
        if members != 1 {
            return self.refuse(
                400,
                "the body must be a StreamResponse: exactly one of task, message, statusUpdate, artifactUpdate",
            );
        }
        let id = TaskId::from_client(task.clone());
        let Some(nudge) = self.follower.nudger() else {
            return WebhookResponse::new(503, "not ready yet; try again\n");
        };
        self.metrics.record(PUSH_OPERATION, UpstreamOutcome::Ok);
        let delay = {
            let mut state = self.state();
            state.stats.accepted += 1;
            let now = Instant::now();
            if state.last.len() >= MAX_REMEMBERED {
                state
                    .last
                    .retain(|_, seen| seen.pending || now.duration_since(seen.at) < GAP);
            }
            match state.last.get_mut(&task) {
                // A nudge is already due: it covers this change too.
                Some(seen) if seen.pending => return WebhookResponse::new(204, ""),
                // Nudged a moment ago: once more when the gap is over, so the
                // last change of a burst is read too.
                Some(seen) if now.duration_since(seen.at) < GAP => {
                    seen.pending = true;
                    Some(GAP - now.duration_since(seen.at))
                }
                _ => {
                    state.last.insert(
                        task.clone(),
                        Seen {
                            at: now,
                            pending: false,
                        },
                    );
                    None
                }
            }
        };
        if let Some(delay) = delay {
            let hook = self.clone();
            tokio::spawn(async move {
                tokio::time::sleep(delay).await;
                if let Some(seen) = hook.state().last.get_mut(&task) {
                    *seen = Seen {
                        at: Instant::now(),
                        pending: false,
                    };
                }
                hook.nudge_until_taken(&nudge, &id, 0).await;
            });
            return WebhookResponse::new(204, "");
        }
        match nudge.nudge(&id).await {
            Ok(true) => {
                self.state().stats.nudges += 1;
                WebhookResponse::new(204, "")
            }
            Ok(false) => {
                // A step is running (or the task waits for input): try
                // again a few times, after answering the agent.
                let hook = self.clone();
                tokio::spawn(async move { hook.nudge_until_taken(&nudge, &id, 1).await });
                WebhookResponse::new(204, "")
            }
            // The store is down: the agent's retry (§4.3.3) may get through.
            Err(e) => {
                tracing::warn!(task = %id, error = %e, "a push notification could not nudge its task");
                WebhookResponse::new(503, "the task store is unavailable; try again\n")
            }
        }
    }

    /// Nudges until the engine takes it, at most [`RENUDGES`] times
    /// (`tried` already).
    async fn nudge_until_taken(&self, nudge: &agentgate_backend::Nudge, id: &TaskId, tried: u32) {
        for attempt in tried..RENUDGES {
            if attempt > 0 {
                tokio::time::sleep(RENUDGE_AFTER).await;
            }
            if let Ok(true) = nudge.nudge(id).await {
                self.state().stats.nudges += 1;
                return;
            }
        }
    }
}

/// The webhook as the SDK's [`Webhook`].
#[derive(Debug, Clone)]
pub struct PushWebhook(pub Arc<PushHook>);

impl Webhook for PushWebhook {
    fn handle(&self, request: WebhookRequest) -> BoxFuture<'_, WebhookResponse> {
        Box::pin(self.0.clone().handle_request(request))
    }

    fn check_sender(&self, head: &WebhookRequest) -> Option<WebhookResponse> {
        self.0.check_token(head)
    }

    fn max_body_bytes(&self) -> usize {
        MAX_PUSH_BODY_BYTES
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_bound_to_its_task_and_secret() {
        let secret = Secret::new("0123456789abcdef0123456789abcdef");
        let other = Secret::new("fedcba9876543210fedcba9876543210");
        let t = token(&secret, "task-a");
        assert!(valid(&secret, "task-a", &t));
        assert!(!valid(&secret, "task-b", &t));
        assert!(!valid(&other, "task-a", &t));
        assert!(!valid(&secret, "task-a", "not base64 !"));
        assert_eq!(t, token(&secret, "task-a"), "the same for a repeated step");
    }
}
