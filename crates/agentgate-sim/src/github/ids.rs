//! Identifiers in GitHub's shapes: global node ids (`U_kgDO…`, `I_kwDO…`), opaque
//! connection cursors, task and session ids, and ISO-8601 timestamps.

use chrono::{DateTime, SecondsFormat, Utc};

const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// A global node id: `prefix` (such as `U_kgDO` or `I_kwDO`) followed by a base64-like
/// encoding of the database id.
pub(crate) fn node_id(prefix: &str, db_id: u64) -> String {
    let mut digits = Vec::new();
    let mut n = db_id;
    loop {
        digits.push(ALPHABET[usize::try_from(n % 64).unwrap_or(0)]);
        n /= 64;
        if n == 0 {
            break;
        }
    }
    while digits.len() < 6 {
        digits.push(b'A');
    }
    digits.reverse();
    format!("{prefix}{}", String::from_utf8_lossy(&digits))
}

/// An opaque connection cursor for the position `index` (0-based).
pub(crate) fn cursor(index: usize) -> String {
    let raw = format!("cursor:v2:{index}");
    raw.bytes().map(|b| format!("{b:02x}")).collect()
}

/// The position a cursor from [`cursor`] names, `None` if it is not one.
pub(crate) fn parse_cursor(cursor: &str) -> Option<usize> {
    if !cursor.len().is_multiple_of(2) || !cursor.is_ascii() {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..cursor.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(cursor.get(i..i + 2)?, 16).ok())
        .collect();
    let text = String::from_utf8(bytes?).ok()?;
    text.strip_prefix("cursor:v2:")?.parse().ok()
}

/// A random UUID-shaped id (version 4 layout).
pub(crate) fn uuid() -> String {
    let bytes: [u8; 16] = rand::random();
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-4{}-a{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[13..16],
        &hex[17..20],
        &hex[20..32]
    )
}

/// GitHub's timestamp format: `2026-12-02T13:00:05Z`.
pub(crate) fn iso(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// Parses an ISO-8601 timestamp (`Z` or an offset).
pub(crate) fn parse_iso(s: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s.trim())
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip() {
        for i in [0, 1, 99, 100, 12345] {
            assert_eq!(parse_cursor(&cursor(i)), Some(i));
        }
        assert_eq!(parse_cursor("nope"), None);
        assert_eq!(parse_cursor("zz"), None);
    }

    #[test]
    fn node_ids_are_distinct_and_prefixed() {
        let a = node_id("U_kgDO", 1);
        let b = node_id("U_kgDO", 2);
        assert!(a.starts_with("U_kgDO"));
        assert_ne!(a, b);
        assert_eq!(uuid().len(), 36);
    }
}
