//! Reading JSON-RPC messages off a Server-Sent Events response (a
//! `subscriptions/listen` stream, a streamed tools/call), for requests
//! rmcp's client cannot send: one `data:` payload at a time, events without
//! data (the priming event) skipped.

use std::time::Duration;

use serde_json::Value;

/// How long [`SseReader::next`] waits for a message.
const MESSAGE_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug)]
pub struct SseReader {
    response: reqwest::Response,
    buffered: String,
}

impl SseReader {
    pub fn new(response: reqwest::Response) -> Self {
        Self {
            response,
            buffered: String::new(),
        }
    }

    /// The next JSON-RPC message; panics after 30 s or at the stream's end.
    pub async fn next(&mut self) -> Value {
        let deadline = tokio::time::Instant::now() + MESSAGE_TIMEOUT;
        loop {
            while let Some(end) = self.buffered.find("\n\n") {
                let event: String = self.buffered.drain(..end + 2).collect();
                let data: String = event
                    .lines()
                    .filter_map(|l| l.strip_prefix("data:"))
                    .map(str::trim)
                    .collect();
                if !data.is_empty() {
                    return serde_json::from_str(&data).expect("SSE data is JSON");
                }
            }
            let chunk = tokio::time::timeout_at(deadline, self.response.chunk())
                .await
                .expect("no message on the stream within 30 s")
                .expect("read the stream")
                .expect("the stream ended");
            self.buffered.push_str(&String::from_utf8_lossy(&chunk));
        }
    }

    /// The response, for a request that was refused (its whole body).
    pub fn into_response(self) -> reqwest::Response {
        self.response
    }
}
