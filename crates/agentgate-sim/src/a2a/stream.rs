//! Server-Sent Events for SendStreamingMessage and SubscribeToTask (§9.4.2): each
//! event is `data: {"jsonrpc":"2.0","id":…,"result":<StreamResponse>}`. A task stream
//! starts with the Task snapshot and ends after the event that
//! [`StreamResponse::closes_stream`] names; a stream cut by the fault knob ends with
//! an error in place of its next event, which aborts the HTTP body (no chunked
//! terminator), as a dropped connection looks to the client.

use std::convert::Infallible;

use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::StreamExt as _;
use futures::stream::{self, BoxStream};
use serde_json::{Value, json};
use tokio::sync::broadcast;

use super::A2aSim;
use super::wire::{StreamResponse, Task};

/// The error that ends a stream cut by a fault.
#[derive(Debug, thiserror::Error)]
#[error("stream dropped (injected fault)")]
struct Dropped;

/// Counts a stream as open from its start until its body is dropped (it ended, or
/// the client went away), for [`A2aStats::open_streams`](super::A2aStats).
struct OpenStream(A2aSim);

impl OpenStream {
    fn new(sim: &A2aSim) -> Self {
        let mut store = sim.inner.store();
        let stats = &mut store.stats;
        stats.streams_opened += 1;
        stats.open_streams += 1;
        stats.max_open_streams = stats.max_open_streams.max(stats.open_streams);
        Self(sim.clone())
    }
}

impl Drop for OpenStream {
    fn drop(&mut self) {
        let mut store = self.0.inner.store();
        store.stats.open_streams = store.stats.open_streams.saturating_sub(1);
    }
}

fn event(id: &Value, response: &StreamResponse) -> Event {
    let body = json!({ "jsonrpc": "2.0", "id": id, "result": response });
    Event::default().data(body.to_string())
}

/// A stream of one event (a direct Message answer).
pub(crate) fn single(id: &Value, response: StreamResponse) -> Response {
    let events = stream::iter([Ok::<_, Infallible>(event(id, &response))]);
    Sse::new(events).into_response()
}

/// The Task snapshot, then its events until one closes the stream.
pub(crate) fn task_stream(
    sim: &A2aSim,
    id: Value,
    snapshot: Task,
    receiver: broadcast::Receiver<StreamResponse>,
) -> Response {
    let first = StreamResponse::Task(snapshot);
    let done = first.closes_stream();
    let later = stream::unfold((receiver, done), |(mut receiver, done)| async move {
        if done {
            return None;
        }
        match receiver.recv().await {
            Ok(next) => {
                let done = next.closes_stream();
                Some((next, (receiver, done)))
            }
            // A slow reader missed events: end the stream; the client resubscribes and
            // gets a fresh snapshot first.
            Err(broadcast::error::RecvError::Lagged(_) | broadcast::error::RecvError::Closed) => {
                None
            }
        }
    });
    let responses = stream::once(async move { first }).chain(later);
    let open = OpenStream::new(sim);
    let cut_after = sim.faults().take_stream_drop();
    let events: BoxStream<'static, Result<Event, Dropped>> = match cut_after {
        None => responses.map(move |r| Ok(event(&id, &r))).boxed(),
        Some(after) => {
            sim.inner.store().stats.streams_dropped += 1;
            // The event after the first `after` ones aborts the body instead of going
            // out. Waiting for it (rather than aborting at once) lets the connection
            // flush the events already written, so the client gets exactly `after`.
            responses
                .enumerate()
                .map(move |(i, r)| {
                    if i < after {
                        Ok(event(&id, &r))
                    } else {
                        Err(Dropped)
                    }
                })
                .boxed()
        }
    };
    // The guard lives as long as the body does.
    let events = events.map(move |event| {
        let _open = &open;
        event
    });
    Sse::new(events)
        .keep_alive(KeepAlive::default())
        .into_response()
}
