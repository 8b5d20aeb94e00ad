//! Identifiers and timestamps of tasks, contexts, messages and artifacts.

use rand::Rng;

/// A random UUID v4 string (the form the official SDKs generate).
pub(super) fn new_id() -> String {
    let mut bytes: [u8; 16] = rand::rng().random();
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// Now, as the specification's timestamp form (§5.6.1: UTC, `Z`, milliseconds).
pub(super) fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_uuid_v4_shaped_and_distinct() {
        let a = new_id();
        assert_eq!(a.len(), 36);
        assert_eq!(&a[14..15], "4");
        assert_ne!(a, new_id());
    }

    #[test]
    fn timestamps_are_utc_with_milliseconds() {
        let t = now();
        assert!(t.ends_with('Z'), "{t}");
        assert_eq!(t.len(), "2025-10-28T10:30:00.000Z".len(), "{t}");
    }
}
