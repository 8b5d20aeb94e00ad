//! Secrets at rest: what the store keeps that would let someone act as
//! agentgate is sealed with a key that is *not* in the store.
//!
//! Today that is the key that signs MRTR `requestState` (whoever holds it can
//! forge a state for any principal). Tasks themselves hold no credentials:
//! the backends take their AWS and GitHub credentials from this process's
//! environment, never from a task, so a copied database or a PostgreSQL dump
//! gives away task contents but nothing to call AWS or GitHub with.
//!
//! Flow: [`shared_secret`] makes a fresh random secret, seals it
//! (XChaCha20-Poly1305, the secret's name as associated data, so a sealed
//! value cannot be moved to another name) and asks the store to keep it
//! unless one is already there; it then opens whatever the store holds. A
//! value written in clear by an earlier version is sealed in place the first
//! time it is read.
//!
//! The [`SealKey`] comes from `AGENTGATE_STORE_KEY`, a key file, or (the
//! default) a file created next to the SQLite database, mode 0600; see
//! `agentgate serve --help`. Every instance on one store needs the same key.

use std::fmt;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use chacha20poly1305::aead::{Aead as _, KeyInit as _, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use rand::RngCore as _;

use super::{StoreError, TaskStore};

/// Marks a sealed value (and its format version) in the `secrets` table.
const MAGIC: &[u8] = b"agseal1:";
const NONCE_LEN: usize = 24;
const KEY_LEN: usize = 32;

/// What went wrong getting or opening a sealed secret.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SealError {
    #[error(
        "store key: expected {KEY_LEN} bytes as 64 hex digits or base64 \
         (make one with `openssl rand -hex 32`), got {0}"
    )]
    BadKey(String),
    #[error("store key file {path}: {source}")]
    KeyFile {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "the store's secret `{0}` was sealed with a different store key: give every \
         instance on this store the same key (AGENTGATE_STORE_KEY or --store-key-file)"
    )]
    WrongKey(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The 256-bit key that seals the store's secrets. Its `Debug` shows nothing.
#[derive(Clone)]
pub struct SealKey([u8; KEY_LEN]);

impl fmt::Debug for SealKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SealKey(***)")
    }
}

impl SealKey {
    /// A fresh random key, for stores that live only as long as this process
    /// (tests, `sqlite::memory:`).
    pub fn generate() -> Self {
        let mut key = [0u8; KEY_LEN];
        rand::rng().fill_bytes(&mut key);
        Self(key)
    }

    /// Parses 64 hex digits or base64 (standard or URL-safe, padded or not)
    /// of 32 bytes. Surrounding whitespace is ignored (key files end in a
    /// newline).
    pub fn parse(text: &str) -> Result<Self, SealError> {
        let text = text.trim();
        let bytes = if text.len() == 2 * KEY_LEN && text.bytes().all(|b| b.is_ascii_hexdigit()) {
            (0..KEY_LEN)
                .map(|i| u8::from_str_radix(&text[2 * i..2 * i + 2], 16))
                .collect::<Result<Vec<u8>, _>>()
                .map_err(|_| SealError::BadKey("invalid hex".into()))?
        } else {
            let engines = [
                &base64::engine::general_purpose::STANDARD,
                &base64::engine::general_purpose::STANDARD_NO_PAD,
                &base64::engine::general_purpose::URL_SAFE,
                &base64::engine::general_purpose::URL_SAFE_NO_PAD,
            ];
            engines
                .iter()
                .find_map(|engine| engine.decode(text).ok())
                .ok_or_else(|| SealError::BadKey(format!("{} characters of neither", text.len())))?
        };
        let key: [u8; KEY_LEN] = bytes
            .as_slice()
            .try_into()
            .map_err(|_| SealError::BadKey(format!("{} bytes", bytes.len())))?;
        Ok(Self(key))
    }

    /// Reads the key in `path`, creating it (random, mode 0600) when there is
    /// no such file. Instances racing to create it end up with the same key:
    /// the file is written aside and linked into place only if still absent.
    pub fn load_or_create(path: &Path) -> Result<Self, SealError> {
        let io = |source| SealError::KeyFile {
            path: path.display().to_string(),
            source,
        };
        match std::fs::read_to_string(path) {
            Ok(text) => return Self::parse(&text),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io(e)),
        }
        let dir = path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(io)?;
        let key = Self::generate();
        let mut aside = tempfile::Builder::new()
            .prefix(".store-key")
            .tempfile_in(dir)
            .map_err(io)?;
        set_owner_only(aside.path()).map_err(io)?;
        writeln!(aside, "{}", key.to_hex()).map_err(io)?;
        aside.as_file().sync_all().map_err(io)?;
        match std::fs::hard_link(aside.path(), path) {
            Ok(()) => Ok(key),
            // Another instance won the race: use its key.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                Self::parse(&std::fs::read_to_string(path).map_err(io)?)
            }
            Err(e) => Err(io(e)),
        }
    }

    /// The default key file of a SQLite database: beside it, `<file>.key`.
    pub fn beside(database: &Path) -> PathBuf {
        let mut name = database.as_os_str().to_owned();
        name.push(".key");
        PathBuf::from(name)
    }

    /// Where the key of the store at `url` is kept by default: beside a
    /// SQLite database file; `None` for in-memory SQLite and for PostgreSQL
    /// (whose instances may be on several machines: the caller picks).
    pub fn default_file(url: &str) -> Option<PathBuf> {
        use std::str::FromStr as _;
        if !url.starts_with("sqlite:") || url.contains(":memory:") {
            return None;
        }
        let options = sqlx::sqlite::SqliteConnectOptions::from_str(url).ok()?;
        Some(Self::beside(options.get_filename()))
    }

    fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    fn cipher(&self) -> XChaCha20Poly1305 {
        XChaCha20Poly1305::new((&self.0).into())
    }

    fn seal(&self, name: &str, plain: &[u8]) -> Vec<u8> {
        let mut nonce = [0u8; NONCE_LEN];
        rand::rng().fill_bytes(&mut nonce);
        let payload = Payload {
            msg: plain,
            aad: name.as_bytes(),
        };
        // Encryption only fails for messages near 2^38 bytes; secrets are 32.
        let sealed = self
            .cipher()
            .encrypt(XNonce::from_slice(&nonce), payload)
            .unwrap_or_default();
        [MAGIC, &nonce, &sealed].concat()
    }

    fn open(&self, name: &str, stored: &[u8]) -> Result<Vec<u8>, SealError> {
        let body = stored
            .strip_prefix(MAGIC)
            .filter(|body| body.len() > NONCE_LEN)
            .ok_or_else(|| SealError::WrongKey(name.to_owned()))?;
        let (nonce, sealed) = body.split_at(NONCE_LEN);
        let payload = Payload {
            msg: sealed,
            aad: name.as_bytes(),
        };
        self.cipher()
            .decrypt(XNonce::from_slice(nonce), payload)
            .map_err(|_| SealError::WrongKey(name.to_owned()))
    }
}

#[cfg(unix)]
fn set_owner_only(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
}

#[cfg(not(unix))]
fn set_owner_only(_path: &Path) -> std::io::Result<()> {
    Ok(())
}

/// A named random 32-byte secret shared by every instance on `store`, kept
/// sealed with `key`. Created on first use.
pub async fn shared_secret(
    store: &dyn TaskStore,
    key: &SealKey,
    name: &str,
) -> Result<Vec<u8>, SealError> {
    let mut fresh = vec![0u8; 32];
    rand::rng().fill_bytes(&mut fresh);
    let stored = store.secret(name, key.seal(name, &fresh)).await?;
    if stored.starts_with(MAGIC) {
        return key.open(name, &stored);
    }
    // Written in clear by a version before sealing: seal it now. Losing the
    // race to another instance doing the same is fine, it wrote the same
    // secret under the same key (or the next read says the keys differ).
    store
        .replace_secret(name, &stored, key.seal(name, &stored))
        .await?;
    tracing::info!(
        secret = name,
        "sealed a secret stored in clear by an earlier version"
    );
    Ok(stored)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_values_open_only_with_their_key_and_name() {
        let key = SealKey::generate();
        let sealed = key.seal("a", b"secret bytes");
        assert!(sealed.starts_with(MAGIC));
        assert!(
            !sealed.windows(12).any(|w| w == b"secret bytes"),
            "the plain text must not be in the sealed value"
        );
        assert_eq!(key.open("a", &sealed).expect("opens"), b"secret bytes");
        assert!(matches!(
            key.open("b", &sealed),
            Err(SealError::WrongKey(_))
        ));
        assert!(matches!(
            SealKey::generate().open("a", &sealed),
            Err(SealError::WrongKey(_))
        ));
        assert!(matches!(
            key.open("a", b"agseal1:"),
            Err(SealError::WrongKey(_))
        ));
    }

    #[test]
    fn keys_parse_from_hex_and_base64_and_bad_ones_say_how_to_make_one() {
        let key = SealKey::generate();
        let hex = key.to_hex();
        assert_eq!(SealKey::parse(&format!("{hex}\n")).expect("hex").0, key.0);
        let b64 = base64::engine::general_purpose::STANDARD.encode(key.0);
        assert_eq!(SealKey::parse(&b64).expect("base64").0, key.0);
        let err = SealKey::parse("too-short").expect_err("refused");
        assert!(err.to_string().contains("openssl rand -hex 32"), "{err}");
        assert_eq!(format!("{key:?}"), "SealKey(***)");
    }

    #[test]
    fn key_files_are_created_once_owner_only_and_reused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = SealKey::beside(&dir.path().join("tasks.db"));
        assert!(path.ends_with("tasks.db.key"));
        let first = SealKey::load_or_create(&path).expect("created");
        let again = SealKey::load_or_create(&path).expect("read back");
        assert_eq!(first.0, again.0);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(&path).expect("meta").permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let leftovers = std::fs::read_dir(dir.path()).expect("list").count();
        assert_eq!(leftovers, 1, "the aside file is removed");
    }
}
