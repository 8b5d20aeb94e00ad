//! Holding one upstream answer back: the moment at which a crash loses the
//! answer but not the effect.
//!
//! [`AnswerHold::wrap`] puts a layer in front of an emulator's router. Once
//! armed, the next request that matches is handled by the emulator as usual
//! (its effect happens: an assignment, an agent run, a ticket), the test is
//! told, and the answer never leaves. The test then kills agentgate and checks
//! that a restarted instance neither loses the task nor repeats the effect.

use std::sync::{Arc, Mutex, PoisonError};

use axum::body::Body;
use axum::extract::Request;
use axum::middleware::{self, Next};
use tokio::sync::oneshot;

/// Largest request body the layer reads to match on.
const MAX_BODY: usize = 4 << 20;

/// A switch shared by the test and the layer in front of an emulator.
#[derive(Clone, Debug, Default)]
pub struct AnswerHold {
    armed: Arc<Mutex<Option<Armed>>>,
}

#[derive(Debug)]
struct Armed {
    method: &'static str,
    path: &'static str,
    body: &'static str,
    handled: oneshot::Sender<()>,
}

impl AnswerHold {
    /// Arms the hold for the next request with this method whose path
    /// contains `path` and whose body contains `body` (`""` matches any).
    /// The receiver fires once the emulator has handled that request.
    pub fn arm(
        &self,
        method: &'static str,
        path: &'static str,
        body: &'static str,
    ) -> oneshot::Receiver<()> {
        let (handled, rx) = oneshot::channel();
        *self.armed.lock().unwrap_or_else(PoisonError::into_inner) = Some(Armed {
            method,
            path,
            body,
            handled,
        });
        rx
    }

    /// `router` with the hold in front of it.
    pub fn wrap(&self, router: axum::Router) -> axum::Router {
        let armed = self.armed.clone();
        router.layer(middleware::from_fn(move |request: Request, next: Next| {
            let armed = armed.clone();
            async move {
                let (parts, body) = request.into_parts();
                let bytes = axum::body::to_bytes(body, MAX_BODY)
                    .await
                    .unwrap_or_default();
                let held = {
                    let mut armed = armed.lock().unwrap_or_else(PoisonError::into_inner);
                    let text = String::from_utf8_lossy(&bytes);
                    let matches = armed.as_ref().is_some_and(|h| {
                        parts.method.as_str() == h.method
                            && parts.uri.path().contains(h.path)
                            && text.contains(h.body)
                    });
                    if matches { armed.take() } else { None }
                };
                let response = next
                    .run(Request::from_parts(parts, Body::from(bytes)))
                    .await;
                match held {
                    Some(hold) => {
                        let _ = hold.handled.send(());
                        std::future::pending().await
                    }
                    None => response,
                }
            }
        }))
    }
}
