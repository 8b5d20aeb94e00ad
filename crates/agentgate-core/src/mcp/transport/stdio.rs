//! The stdio guard: what stands between stdin/stdout and rmcp.
//!
//! ```text
//! stdin ──▶ lines (at most `max` bytes) ──▶ UTF-8? JSON? ──▶ rmcp
//!             └─ too long / not UTF-8 / not JSON ──▶ error reply ──▶ stdout
//! rmcp ──▶ whole lines ──▶ stdout (one writer, so replies never interleave)
//! ```
//!
//! rmcp's line codec drops or stalls on input that is not a JSON message (a
//! 50 MB line, invalid UTF-8, nesting deeper than serde's limit), so such a
//! client heard nothing at all. Here every such line gets a JSON-RPC error
//! with `"id": null` (the id cannot be trusted from a message that did not
//! parse): `-32700` for bytes that are not JSON, `-32600` for a message over
//! the size limit. A last message without a newline is still a message; at
//! end of input the guard waits for rmcp to answer every request it passed
//! on before closing rmcp's input. In front of a [`crate::mcp::Gateway`] it also
//! carries the task wire of MCP 2025-11-25 past rmcp, as the HTTP layer does
//! ([`crate::mcp::tasks_2025::StdioWire`]).

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _, DuplexStream};
use tokio::sync::{Mutex, watch};

use crate::mcp::error::{Unread, unread_refusal};
use crate::mcp::listen;
use crate::mcp::tasks_2025::StdioWire;

/// How long, after end of input, the guard waits for rmcp's last answers.
const DRAIN: Duration = Duration::from_secs(30);
/// Bytes buffered between the guard and rmcp, each way.
const PIPE: usize = 256 * 1024;

/// Wraps `input` and `output` for rmcp: returns the reader and writer to
/// give rmcp, and the future that moves bytes (run it beside the service).
pub(super) fn guard<R, W>(
    input: R,
    output: W,
    max: usize,
    tasks_2025: bool,
) -> (
    DuplexStream,
    DuplexStream,
    impl Future<Output = ()> + Send + 'static,
)
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (rmcp_in, to_rmcp) = tokio::io::duplex(PIPE);
    let (rmcp_out, from_rmcp) = tokio::io::duplex(PIPE);
    let output = Arc::new(Mutex::new(output));
    let (answered_tx, answered) = watch::channel(0u64);
    let wire = Arc::new(std::sync::Mutex::new(StdioWire::new(tasks_2025)));
    let run = async move {
        let replies = tokio::spawn(copy_replies(
            from_rmcp,
            output.clone(),
            answered_tx,
            wire.clone(),
        ));
        read_requests(input, to_rmcp, output, answered, max, wire).await;
        let _ = replies.await;
    };
    (rmcp_in, rmcp_out, run)
}

/// Reads stdin line by line, passing JSON messages to rmcp and answering
/// the rest.
async fn read_requests<R, W>(
    mut input: R,
    mut to_rmcp: DuplexStream,
    output: Arc<Mutex<W>>,
    mut answered: watch::Receiver<u64>,
    max: usize,
    wire: Arc<std::sync::Mutex<StdioWire>>,
) where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut line = Vec::new();
    let mut oversized = false;
    let mut forwarded = 0u64;
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let n = match input.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let mut rest = &chunk[..n];
        while let Some(newline) = rest.iter().position(|b| *b == b'\n') {
            let (head, tail) = rest.split_at(newline);
            if !oversized {
                line.extend_from_slice(head);
            }
            if oversized || line.len() > max {
                reply(&output, too_large(max)).await;
            } else if let Some(request) = check(&mut line, &output, &wire).await {
                forwarded += u64::from(request);
                if to_rmcp.write_all(&line).await.is_err()
                    || to_rmcp.write_all(b"\n").await.is_err()
                {
                    return;
                }
            }
            line.clear();
            oversized = false;
            rest = &tail[1..];
        }
        if !oversized {
            line.extend_from_slice(rest);
            if line.len() > max {
                // Drop what was read; the rest of the line is skipped too.
                oversized = true;
                line = Vec::new();
            }
        }
    }
    // End of input: a last message without a newline is still a message.
    if oversized {
        reply(&output, too_large(max)).await;
    } else if !line.iter().all(u8::is_ascii_whitespace)
        && let Some(request) = check(&mut line, &output, &wire).await
    {
        forwarded += u64::from(request);
        let _ = to_rmcp.write_all(&line).await;
        let _ = to_rmcp.write_all(b"\n").await;
    }
    // Let rmcp answer what it was given before it sees the end of input.
    let _ = tokio::time::timeout(DRAIN, answered.wait_for(|n| *n >= forwarded)).await;
    let _ = to_rmcp.shutdown().await;
}

/// `Some(is_request)` for a line to pass to rmcp; `None` when it was
/// answered here (or is blank). A 2025-11-25 task request is rewritten in
/// place for the gateway ([`StdioWire::inbound`]).
async fn check<W: AsyncWrite + Unpin>(
    whole: &mut Vec<u8>,
    output: &Mutex<W>,
    wire: &std::sync::Mutex<StdioWire>,
) -> Option<bool> {
    let line = whole.strip_suffix(b"\r").unwrap_or(whole);
    if line.iter().all(u8::is_ascii_whitespace) {
        return None;
    }
    let Ok(text) = std::str::from_utf8(line) else {
        reply(
            output,
            unread_refusal(
                Unread::NotJson,
                "Parse error: the message is not valid UTF-8",
            ),
        )
        .await;
        return None;
    };
    match serde_json::from_str::<Value>(text) {
        Ok(value) => {
            if value.get("method").and_then(Value::as_str) == Some("subscriptions/listen") {
                // What the HTTP layer does for a listen with `taskIds`.
                match listen::inspect(&value) {
                    listen::Inspection::PassThrough => {}
                    listen::Inspection::Listen(ids) => {
                        let key = value.get("id").map(Value::to_string).unwrap_or_default();
                        listen::stdio_listens().insert(key, ids);
                    }
                    listen::Inspection::Refuse(_, body) => {
                        reply(output, body).await;
                        return None;
                    }
                }
            }
            let request = value.get("method").is_some() && value.get("id").is_some();
            let mut value = value;
            if wire
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .inbound(&mut value)
            {
                *whole = value.to_string().into_bytes();
            }
            Some(request)
        }
        Err(e) => {
            reply(
                output,
                unread_refusal(
                    Unread::NotJson,
                    &format!("Parse error: the message is not valid JSON ({e})"),
                ),
            )
            .await;
            None
        }
    }
}

/// Copies rmcp's replies to stdout a whole line at a time, counting answers.
async fn copy_replies<W: AsyncWrite + Unpin>(
    mut from_rmcp: DuplexStream,
    output: Arc<Mutex<W>>,
    answered: watch::Sender<u64>,
    wire: Arc<std::sync::Mutex<StdioWire>>,
) {
    let mut pending = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let n = match from_rmcp.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        pending.extend_from_slice(&chunk[..n]);
        while let Some(newline) = pending.iter().position(|b| *b == b'\n') {
            let mut line: Vec<u8> = pending.drain(..=newline).collect();
            let parsed = serde_json::from_slice::<Value>(&line).ok();
            let is_answer = parsed.as_ref().is_some_and(|v| {
                v.get("method").is_none() && (v.get("result").is_some() || v.get("error").is_some())
            });
            if let Some(mut message) = parsed {
                let patched = wire
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .outbound(&mut message);
                if listen::acknowledge_stdio(&mut message) || patched {
                    line = format!("{message}\n").into_bytes();
                }
            }
            let mut out = output.lock().await;
            if out.write_all(&line).await.is_err() || out.flush().await.is_err() {
                return;
            }
            drop(out);
            if is_answer {
                answered.send_modify(|n| *n += 1);
            }
        }
    }
    if !pending.is_empty() {
        let mut out = output.lock().await;
        let _ = out.write_all(&pending).await;
        let _ = out.write_all(b"\n").await;
        let _ = out.flush().await;
    }
}

fn too_large(max: usize) -> Value {
    unread_refusal(
        Unread::Invalid,
        &format!(
            "Invalid Request: the message exceeds the {max}-byte limit for one stdio message; \
             send smaller arguments or input responses"
        ),
    )
}

async fn reply<W: AsyncWrite + Unpin>(output: &Mutex<W>, message: Value) {
    let mut line = message.to_string().into_bytes();
    line.push(b'\n');
    let mut out = output.lock().await;
    let _ = out.write_all(&line).await;
    let _ = out.flush().await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncBufReadExt as _;

    /// Runs the guard over `input`; returns what reached rmcp and what was
    /// answered on stdout (with rmcp answering nothing).
    async fn run(input: Vec<u8>, max: usize) -> (Vec<String>, Vec<Value>) {
        let (mut stdin_w, stdin_r) = tokio::io::duplex(1 << 20);
        let (stdout_w, stdout_r) = tokio::io::duplex(1 << 20);
        let (rmcp_in, rmcp_out, guard) = guard(stdin_r, stdout_w, max, false);
        let guard = tokio::spawn(guard);
        tokio::spawn(async move {
            let _ = stdin_w.write_all(&input).await;
            let _ = stdin_w.shutdown().await;
        });
        // rmcp's side: read what it was given, answer each request.
        let rmcp = tokio::spawn(async move {
            let mut seen = Vec::new();
            let mut lines = tokio::io::BufReader::new(rmcp_in).lines();
            let mut out = rmcp_out;
            while let Ok(Some(line)) = lines.next_line().await {
                let value: Value = serde_json::from_str(&line).expect("rmcp gets JSON only");
                if let Some(id) = value.get("id") {
                    let answer = serde_json::json!({"jsonrpc": "2.0", "id": id, "result": {}});
                    out.write_all(format!("{answer}\n").as_bytes())
                        .await
                        .expect("answer");
                }
                seen.push(line);
            }
            drop(out);
            seen
        });
        guard.await.expect("guard");
        let seen = rmcp.await.expect("rmcp");
        let mut replies = Vec::new();
        let mut lines = tokio::io::BufReader::new(stdout_r).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            replies.push(serde_json::from_str(&line).expect("stdout is JSON lines"));
        }
        (seen, replies)
    }

    fn codes(replies: &[Value]) -> Vec<i64> {
        replies
            .iter()
            .filter_map(|r| r["error"]["code"].as_i64())
            .collect()
    }

    #[tokio::test]
    async fn every_bad_line_gets_an_error_with_a_null_id_and_good_lines_pass() {
        let mut input = Vec::new();
        input.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n");
        input.extend(std::iter::repeat_n(b'x', 250_000));
        input.push(b'\n');
        input.extend_from_slice(b"\xff\xfe not utf-8\n");
        input.extend(std::iter::repeat_n(b'[', 100_000));
        input.push(b'\n');
        input.extend_from_slice(b"this is not json\n\n\r\n");
        input.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}");
        let (seen, replies) = run(input, 200_000).await;
        assert_eq!(
            seen.len(),
            2,
            "only the two JSON messages reach rmcp: {seen:?}"
        );
        assert!(
            seen[1].contains("\"id\":2"),
            "the last line, without a newline, counts"
        );
        let errors: Vec<&Value> = replies
            .iter()
            .filter(|r| r.get("error").is_some())
            .collect();
        assert_eq!(codes(&replies), [-32600, -32700, -32700, -32700]);
        for e in &errors {
            assert!(e["id"].is_null(), "error replies carry id null: {e}");
            assert_eq!(e["jsonrpc"], "2.0");
        }
        assert!(
            errors[0]["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("200000-byte limit"))
        );
        assert!(
            errors[2]["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("recursion limit"))
        );
        // rmcp's answers to both requests were written before the end.
        let answered: Vec<i64> = replies.iter().filter_map(|r| r["id"].as_i64()).collect();
        assert_eq!(answered, [1, 2]);
    }

    #[tokio::test]
    async fn a_line_far_over_the_limit_is_skipped_whole() {
        let mut input = vec![b'{'; 3 * 1024 * 1024];
        input.push(b'\n');
        input.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"ping\"}\n");
        let (seen, replies) = run(input, 64 * 1024).await;
        assert_eq!(seen.len(), 1);
        assert_eq!(codes(&replies), [-32600]);
        assert_eq!(replies.last().expect("answer")["id"], 7);
    }
}
