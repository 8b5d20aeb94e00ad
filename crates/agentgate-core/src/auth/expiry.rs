//! A stream lives no longer than the token that opened it: an SSE answer
//! (the GET stream, `subscriptions/listen`, a POST answered as events) on a
//! token with an expiry ends, cleanly, when this server would refuse that
//! token (its `exp` plus the configured leeway). The client reconnects with
//! a fresh token, so a revoked or downscoped grant stops receiving task
//! updates once its token runs out instead of keeping a stream for days.

use std::time::{Duration, SystemTime};

use axum::http::header;
use axum::response::Response;
use futures::StreamExt as _;

/// `response` with its body cut at `expires_at + leeway` when it is an
/// event stream; any other response is returned as it is (it is one
/// message, already complete).
pub(super) fn end_streams_at(
    response: Response,
    expires_at: SystemTime,
    leeway: Duration,
) -> Response {
    let is_stream = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| {
            value
                .trim_start()
                .to_ascii_lowercase()
                .starts_with("text/event-stream")
        });
    if !is_stream {
        return response;
    }
    // A token already past `exp` (accepted within the leeway) still gets
    // the rest of its leeway, measured from now on the monotonic clock.
    let left = expires_at
        .duration_since(SystemTime::now())
        .unwrap_or(Duration::ZERO)
        .saturating_add(leeway);
    let (parts, body) = response.into_parts();
    let body = body.into_data_stream().take_until(tokio::time::sleep(left));
    Response::from_parts(parts, axum::body::Body::from_stream(body))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::response::IntoResponse as _;
    use http_body_util::BodyExt as _;

    #[tokio::test(start_paused = true)]
    async fn an_event_stream_ends_at_the_expiry_and_other_answers_are_untouched() {
        // A stream that never ends by itself.
        let endless = || {
            let events = futures::stream::pending::<Result<axum::body::Bytes, std::io::Error>>();
            (
                [(header::CONTENT_TYPE, "text/event-stream")],
                axum::body::Body::from_stream(events),
            )
                .into_response()
        };
        let expires_at = SystemTime::now() + Duration::from_secs(5);
        let cut = end_streams_at(endless(), expires_at, Duration::from_secs(1));
        let read = tokio::time::timeout(Duration::from_secs(7), cut.into_body().collect()).await;
        assert!(read.is_ok(), "the stream ended at exp + leeway");

        let kept = end_streams_at(endless(), expires_at, Duration::ZERO);
        let read = tokio::time::timeout(Duration::from_secs(3), kept.into_body().collect()).await;
        assert!(read.is_err(), "the stream lives until exp");

        let json = ([(header::CONTENT_TYPE, "application/json")], "{}").into_response();
        let json = end_streams_at(json, SystemTime::now(), Duration::ZERO);
        let body = json.into_body().collect().await.expect("body").to_bytes();
        assert_eq!(&body[..], b"{}");
    }
}
