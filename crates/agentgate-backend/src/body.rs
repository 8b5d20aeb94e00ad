//! Reading an upstream's answer through a limit: [`read_bounded`] takes a
//! `reqwest` response's body chunk by chunk and stops once it holds more
//! than the cap, so an upstream that answers with an endless or huge body
//! costs at most the cap (plus one chunk) of memory and is cut off at once,
//! not when the request timeout ends it.
//!
//! ```text
//! Content-Length > cap? ─ yes ─▶ TooLarge (nothing read, the connection dropped)
//! chunk ─▶ held + chunk > cap? ─ yes ─▶ TooLarge (the response dropped: the connection closes)
//!       └ no ─▶ keep it, next chunk … end of body ─▶ the bytes
//! ```
//!
//! The error says how much was read and what the cap is; the caller adds
//! which upstream and which answer it was ("the card at … is over the
//! 256 KiB cap (stopped after reading 270336 bytes)").

use std::fmt;

/// An answer over its cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{}", describe(*self))]
pub struct TooLarge {
    /// Bytes read before giving up (0 when `Content-Length` said enough).
    pub read: u64,
    /// The `Content-Length` the upstream announced, if it was over the cap.
    pub declared: Option<u64>,
    /// The cap, in bytes.
    pub cap: u64,
}

/// Reads after "the answer is", "the card is", "one event is": the caller
/// names what was over the cap.
fn describe(too: TooLarge) -> String {
    match too.declared {
        Some(declared) => format!(
            "over the {} cap (its Content-Length says {}; not read)",
            Size(too.cap),
            Size(declared)
        ),
        None => format!(
            "over the {} cap (stopped after reading {})",
            Size(too.cap),
            Size(too.read)
        ),
    }
}

/// Why a body could not be read.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    /// It is over the cap.
    #[error(transparent)]
    TooLarge(#[from] TooLarge),
    /// The connection broke (or timed out) while reading it.
    #[error("the answer was cut: {0}")]
    Cut(#[source] reqwest::Error),
}

/// A byte count as people read it (`64 KiB`, `8 MiB`, `1234 bytes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Size(pub u64);

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const KIB: u64 = 1024;
        const MIB: u64 = 1024 * 1024;
        match self.0 {
            n if n >= MIB && n % MIB == 0 => write!(f, "{} MiB", n / MIB),
            n if n >= KIB && n % KIB == 0 => write!(f, "{} KiB", n / KIB),
            n => write!(f, "{n} bytes"),
        }
    }
}

/// The whole body of `response`, or [`BodyError::TooLarge`] as soon as it is
/// known to be over `cap` bytes: at once when its `Content-Length` says so,
/// else when the bytes held would pass the cap. The response is dropped on
/// any error, which closes its connection (it is not returned to the pool
/// with a body still pending).
pub async fn read_bounded(
    mut response: reqwest::Response,
    cap: usize,
) -> Result<Vec<u8>, BodyError> {
    let cap64 = u64::try_from(cap).unwrap_or(u64::MAX);
    if let Some(declared) = response.content_length()
        && declared > cap64
    {
        return Err(TooLarge {
            read: 0,
            declared: Some(declared),
            cap: cap64,
        }
        .into());
    }
    // Sized by the announced length when there is one (it is within the
    // cap here), so a large honest answer is not copied as it grows.
    let hint = response
        .content_length()
        .and_then(|n| usize::try_from(n).ok())
        .unwrap_or(0);
    let mut body = Vec::with_capacity(hint.min(cap));
    while let Some(chunk) = response.chunk().await.map_err(BodyError::Cut)? {
        if body.len() + chunk.len() > cap {
            let read = body.len() + chunk.len();
            return Err(TooLarge {
                read: u64::try_from(read).unwrap_or(u64::MAX),
                declared: None,
                cap: cap64,
            }
            .into());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(Size(64 * 1024).to_string(), "64 KiB");
        assert_eq!(Size(8 * 1024 * 1024).to_string(), "8 MiB");
        assert_eq!(Size(1500).to_string(), "1500 bytes");
    }

    #[test]
    fn the_error_names_what_was_read_and_the_cap() {
        let read = TooLarge {
            read: 70_000,
            declared: None,
            cap: 64 * 1024,
        };
        assert_eq!(
            read.to_string(),
            "over the 64 KiB cap (stopped after reading 70000 bytes)"
        );
        let declared = TooLarge {
            read: 0,
            declared: Some(1 << 30),
            cap: 1 << 20,
        };
        assert!(
            declared
                .to_string()
                .contains("Content-Length says 1024 MiB"),
            "{declared}"
        );
    }
}
