//! Rewriting one event of a server-sent-event stream on its way out:
//! bytes are held back until an event is whole (chunks may split it
//! anywhere), each whole event is offered to the patch, and once the patch
//! has rewritten one, the rest of the stream passes untouched.
//!
//! Used by [`crate::mcp::listen`] (the `subscriptions/listen` acknowledgement)
//! and [`crate::mcp::tasks_2025`] (the response of a 2025-11-25 session).

use axum::body::Bytes;

/// A stream's patch: `patch` gets each whole event (ending in a blank
/// line) and answers its new bytes, or `None` to leave it as it is.
pub(crate) struct FirstEventPatch<P> {
    patch: Option<P>,
    pending: Vec<u8>,
}

impl<P: FnMut(&[u8]) -> Option<Vec<u8>>> FirstEventPatch<P> {
    pub(crate) fn new(patch: P) -> Self {
        Self {
            patch: Some(patch),
            pending: Vec::new(),
        }
    }

    /// The bytes to send for the next chunk `bytes`.
    pub(crate) fn feed(&mut self, bytes: Bytes) -> Bytes {
        let Some(patch) = &mut self.patch else {
            return bytes;
        };
        self.pending.extend_from_slice(&bytes);
        let mut out = Vec::with_capacity(self.pending.len() + 64);
        let mut consumed = 0;
        while let Some(end) = find(&self.pending[consumed..], b"\n\n") {
            let event = &self.pending[consumed..consumed + end + 2];
            consumed += end + 2;
            match patch(event) {
                Some(patched) => {
                    out.extend_from_slice(&patched);
                    out.extend_from_slice(&self.pending[consumed..]);
                    self.pending.clear();
                    self.patch = None;
                    return Bytes::from(out);
                }
                None => out.extend_from_slice(event),
            }
        }
        self.pending.drain(..consumed);
        Bytes::from(out)
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}
