//! Identifiers: random UUIDs for conversations, messages and requests, and the
//! patterns the service checks ids against.

use rand::Rng;

/// A random version-4 UUID in lowercase hyphenated form (36 characters), the shape of
/// every conversation and message id the service hands out.
pub(super) fn new_uuid() -> String {
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

/// 32 random hex characters (128 bits), used for OAuth `state` values.
pub(super) fn new_token() -> String {
    let bytes: [u8; 16] = rand::rng().random();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The pattern of application, conversation and message ids:
/// `[a-zA-Z0-9][a-zA-Z0-9-]{35}`.
pub(super) const ID_PATTERN: &str = "[a-zA-Z0-9][a-zA-Z0-9-]{35}";

/// Whether `s` matches [`ID_PATTERN`].
pub(super) fn is_resource_id(s: &str) -> bool {
    let bytes = s.as_bytes();
    bytes.len() == 36
        && bytes[0].is_ascii_alphanumeric()
        && bytes[1..]
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || *b == b'-')
}

/// The pattern of plugin ids (a lowercase UUID).
pub(super) const PLUGIN_ID_PATTERN: &str =
    "[a-f0-9]{8}-[a-f0-9]{4}-[a-f0-9]{4}-[a-f0-9]{4}-[a-f0-9]{12}";

/// Whether `s` is a lowercase hyphenated UUID (see [`PLUGIN_ID_PATTERN`]).
pub(super) fn is_lowercase_uuid(s: &str) -> bool {
    let bytes = s.as_bytes();
    bytes.len() == 36
        && bytes.iter().enumerate().all(|(i, b)| match i {
            8 | 13 | 18 | 23 => *b == b'-',
            _ => b.is_ascii_digit() || (b'a'..=b'f').contains(b),
        })
}

/// Whether `s` has no control characters (the `\P{C}*` pattern of user ids).
pub(super) fn has_no_control_chars(s: &str) -> bool {
    !s.chars().any(char::is_control)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_ids_match_the_service_patterns() {
        for _ in 0..100 {
            let id = new_uuid();
            assert!(is_resource_id(&id), "{id}");
            assert!(is_lowercase_uuid(&id), "{id}");
        }
        assert_eq!(new_token().len(), 32);
    }

    #[test]
    fn patterns_reject_near_misses() {
        assert!(!is_resource_id("-a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"));
        assert!(!is_resource_id("0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4"));
        assert!(!is_resource_id("0a1b2c3d_4e5f-4a6b-8c7d-9e0f1a2b3c4d"));
        assert!(!is_lowercase_uuid("0A1B2C3D-4E5F-4A6B-8C7D-9E0F1A2B3C4D"));
        assert!(is_lowercase_uuid("0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"));
        assert!(!has_no_control_chars("alice\n"));
    }
}
