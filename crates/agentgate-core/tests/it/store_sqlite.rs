//! The shared store suite on SQLite: in memory, and on a file.

mod in_memory {
    agentgate_core::store_suite!(async {
        agentgate_core::store::SqliteStore::open("sqlite::memory:")
            .await
            .expect("open in-memory store")
    });
}

mod on_file {
    agentgate_core::store_suite!(async {
        // Leaked on purpose: the directory must outlive the store in the test.
        let dir = tempfile::tempdir().expect("tempdir").keep();
        let url = format!("sqlite://{}", dir.join("tasks.db").display());
        agentgate_core::store::SqliteStore::open(&url)
            .await
            .expect("open file store")
    });
}

#[cfg(unix)]
#[tokio::test]
async fn database_file_is_private_to_its_owner() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("tasks.db");
    agentgate_core::store::SqliteStore::open(&format!("sqlite://{}", path.display()))
        .await
        .expect("open");
    let mode = std::fs::metadata(&path).expect("stat").permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
}

/// A path whose directory does not exist is refused, and nothing is
/// created: a typo must not start an empty store in the real one's place.
#[tokio::test]
async fn a_store_in_a_missing_directory_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("nested/dir");
    let url = format!("sqlite://{}", missing.join("tasks.db").display());
    let refused = agentgate_core::store::SqliteStore::open(&url).await;
    match refused {
        Err(agentgate_core::store::StoreError::MissingDirectory { path }) => {
            assert_eq!(path, missing.display().to_string());
        }
        other => panic!("expected MissingDirectory, got {other:?}"),
    }
    assert!(!dir.path().join("nested").exists(), "nothing was created");
}
