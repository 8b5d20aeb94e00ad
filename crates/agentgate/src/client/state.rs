//! The local task list: every task this client started, with where its
//! server is, so `agentgate task …` works after the client or the machine
//! restarts (the Tasks extension says clients SHOULD keep task ids).
//!
//! One JSON file per task in a directory: concurrent clients never rewrite
//! each other's records, and each file is written to a temporary file and
//! renamed over the old one, so a crash leaves the old record or the new,
//! never half of one. The directory is `$AGENTGATE_CLIENT_STATE`, else
//! `tasks/` in the user's data directory (e.g. `~/.local/share/agentgate/client/tasks`).

use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, bail};
use serde::{Deserialize, Serialize};

use super::connection::Server;

/// The environment variable that moves the task list (tests use it).
pub(crate) const STATE_ENV: &str = "AGENTGATE_CLIENT_STATE";

/// One task this client started.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct StartedTask {
    pub task_id: String,
    pub server: Server,
    pub tool: String,
    /// When this client created it (RFC 3339, UTC).
    pub created_at: String,
    /// The status last seen, e.g. `working`, `completed`.
    pub last_status: String,
    /// When `last_status` was seen (RFC 3339, UTC).
    pub last_seen: String,
}

/// The directory of task records.
#[derive(Debug, Clone)]
pub(crate) struct TaskBook {
    dir: PathBuf,
}

impl TaskBook {
    /// The task list at `$AGENTGATE_CLIENT_STATE` or in the user's data directory.
    pub(crate) fn open_default() -> Result<Self> {
        if let Some(dir) = std::env::var_os(STATE_ENV).filter(|d| !d.is_empty()) {
            return Ok(Self::at(PathBuf::from(dir)));
        }
        let dirs =
            directories::ProjectDirs::from("dev", "agentgate", "agentgate").with_context(|| {
                format!("no home directory to keep the task list in; set {STATE_ENV}=DIR")
            })?;
        Ok(Self::at(dirs.data_dir().join("client").join("tasks")))
    }

    pub(crate) fn at(dir: PathBuf) -> Self {
        Self { dir }
    }

    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, task_id: &str) -> PathBuf {
        self.dir.join(format!("{}.json", file_name(task_id)))
    }

    /// Saves (or replaces) a record atomically.
    pub(crate) fn save(&self, record: &StartedTask) -> Result<()> {
        std::fs::create_dir_all(&self.dir)
            .with_context(|| format!("creating the task list directory {}", self.dir.display()))?;
        let json = serde_json::to_vec_pretty(record)?;
        let mut file = tempfile::NamedTempFile::new_in(&self.dir)
            .with_context(|| format!("writing to {}", self.dir.display()))?;
        file.write_all(&json)?;
        file.as_file().sync_all()?;
        let path = self.path(&record.task_id);
        file.persist(&path)
            .with_context(|| format!("saving {}", path.display()))?;
        Ok(())
    }

    /// The record of `task_id`, if this client started it.
    pub(crate) fn get(&self, task_id: &str) -> Result<Option<StartedTask>> {
        let path = self.path(task_id);
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
        };
        let record = serde_json::from_slice(&bytes).with_context(|| {
            format!(
                "{} is not a task record; delete it to forget the task",
                path.display()
            )
        })?;
        Ok(Some(record))
    }

    /// Every record, oldest first. Unreadable files are reported, not fatal.
    pub(crate) fn list(&self) -> Result<Vec<StartedTask>> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => {
                return Err(e).with_context(|| format!("reading {}", self.dir.display()));
            }
        };
        let mut records = Vec::new();
        for entry in entries {
            let path = entry?.path();
            if path.extension().and_then(|e| e.to_str()) != Some("json") {
                continue;
            }
            match std::fs::read(&path)
                .map_err(anyhow::Error::from)
                .and_then(|b| serde_json::from_slice::<StartedTask>(&b).map_err(Into::into))
            {
                Ok(record) => records.push(record),
                Err(e) => eprintln!("warning: skipping {}: {e}", path.display()),
            }
        }
        records.sort_by(|a, b| a.created_at.cmp(&b.created_at));
        Ok(records)
    }

    /// Updates the last status seen of a recorded task (no-op if unrecorded).
    pub(crate) fn note_status(&self, task_id: &str, status: &str) -> Result<()> {
        if let Some(mut record) = self.get(task_id)? {
            record.last_status = status.to_owned();
            record.last_seen = now();
            self.save(&record)?;
        }
        Ok(())
    }

    /// Forgets a task locally (the server is not told).
    pub(crate) fn forget(&self, task_id: &str) -> Result<()> {
        let path = self.path(task_id);
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                bail!(
                    "task {task_id} is not in the local task list ({})",
                    self.dir.display()
                )
            }
            Err(e) => Err(e).with_context(|| format!("removing {}", path.display())),
        }
    }
}

/// Now, RFC 3339 UTC.
pub(crate) fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// A task id as a file name: safe characters kept, the rest %-escaped, so
/// any server-minted id maps to one file and back.
fn file_name(task_id: &str) -> String {
    let mut out = String::with_capacity(task_id.len());
    for (i, b) in task_id.bytes().enumerate() {
        let safe = b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || (b == b'.' && i > 0);
        if safe {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: &str, created: &str) -> StartedTask {
        StartedTask {
            task_id: id.to_owned(),
            server: Server::Http {
                url: "http://127.0.0.1:1/mcp".to_owned(),
            },
            tool: "t".to_owned(),
            created_at: created.to_owned(),
            last_status: "working".to_owned(),
            last_seen: created.to_owned(),
        }
    }

    #[test]
    fn records_survive_reopening_and_list_oldest_first() {
        let dir = tempfile::tempdir().expect("tempdir");
        let book = TaskBook::at(dir.path().join("nested"));
        book.save(&record("b/../x", "2026-01-02T00:00:00Z"))
            .expect("save");
        book.save(&record("a", "2026-01-01T00:00:00Z"))
            .expect("save");
        let again = TaskBook::at(dir.path().join("nested"));
        let ids: Vec<_> = again
            .list()
            .expect("list")
            .into_iter()
            .map(|r| r.task_id)
            .collect();
        assert_eq!(ids, ["a", "b/../x"]);
        again.note_status("a", "completed").expect("note");
        assert_eq!(
            again.get("a").expect("get").expect("some").last_status,
            "completed"
        );
        again.forget("a").expect("forget");
        assert!(again.get("a").expect("get").is_none());
        assert!(
            again
                .forget("a")
                .expect_err("already forgotten")
                .to_string()
                .contains("not in the local task list")
        );
    }

    #[test]
    fn ids_map_to_distinct_plain_file_names() {
        assert_eq!(file_name("abc-1_2.3"), "abc-1_2.3");
        assert_eq!(file_name("../x"), "%2E.%2Fx");
        assert_ne!(file_name("a/b"), file_name("a%2Fb"));
    }
}
