//! A PostgreSQL database ([`TestDatabase`]) or schema ([`TestSchema`]) of
//! the test's own, dropped when the test ends, passed or panicked.
//!
//! The server is `AGENTGATE_TEST_POSTGRES_URL` (default
//! `postgres://postgres@127.0.0.1:5432/postgres`; `.ci/postgres.sh` starts
//! one). `create` makes `<prefix>_<random>` on it; `Drop` drops it again
//! (a database `WITH (FORCE)`; a schema `CASCADE`, after ending the
//! sessions tagged with its name) on a fresh connection, from a thread of
//! its own with a runtime of its own, so it works inside or outside any
//! async runtime and while the test unwinds.
//!
//! Without a server, `create` ends the test through [`harness::skip`]: a
//! test binary on [`harness::Tests`] reports it `ignored, no PostgreSQL at …`
//! (or fails it when `AGENTGATE_REQUIRE_POSTGRES=1`, as CI sets). So every
//! test that uses this module runs on that harness.

use std::io::Write as _;
use std::str::FromStr as _;
use std::time::Duration;

use sqlx::Connection as _;
use sqlx::postgres::{PgConnectOptions, PgConnection};

use crate::harness::{self, Need};

const DEFAULT_SERVER: &str = "postgres://postgres@127.0.0.1:5432/postgres";

/// The server tests use.
pub fn server_url() -> String {
    std::env::var("AGENTGATE_TEST_POSTGRES_URL")
        .ok()
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| DEFAULT_SERVER.to_owned())
}

/// The test server's connect options; panics naming the variable when its
/// URL is not a PostgreSQL URL.
fn server_options() -> PgConnectOptions {
    let url = server_url();
    PgConnectOptions::from_str(&url).unwrap_or_else(|e| {
        panic!(
            "AGENTGATE_TEST_POSTGRES_URL={} is not a PostgreSQL URL: {e}",
            agentgate_core::store::redact_url(&url)
        )
    })
}

/// One connection to the server, or why there is none.
async fn connect(server: &PgConnectOptions) -> Result<PgConnection, String> {
    match tokio::time::timeout(Duration::from_secs(5), PgConnection::connect_with(server)).await {
        Ok(Ok(conn)) => Ok(conn),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("no answer within 5 s".into()),
    }
}

/// Runs `cleanup` to its end on a thread and runtime of its own (`Drop`
/// may run on a runtime's thread, which cannot block on another runtime, or
/// on none at all); says on stderr what was left behind if it fails.
fn clean_up<F>(what: &str, cleanup: impl FnOnce() -> F + Send + 'static)
where
    F: Future<Output = Result<(), String>>,
{
    let done = std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("runtime: {e}"))?
            .block_on(cleanup())
    })
    .join()
    .unwrap_or_else(|_| Err("the cleanup thread panicked".to_owned()));
    if let Err(why) = done {
        let _ = writeln!(std::io::stderr(), "warning: {what} was left behind: {why}");
    }
}

/// Ends the test: no PostgreSQL server answered (see [`harness::skip`]).
fn skip(why: &str) -> ! {
    let shown = agentgate_core::store::redact_url(&server_url());
    harness::skip(Need::Postgres, &format!("no PostgreSQL at {shown} ({why})"))
}

/// A fresh database on the test server; dropped on `Drop`.
#[derive(Debug)]
pub struct TestDatabase {
    server: PgConnectOptions,
    name: String,
    url: String,
}

impl TestDatabase {
    /// Creates `<prefix>_<random>`; ends the test as skipped when no
    /// server answers.
    pub async fn create(prefix: &str) -> Self {
        let server = server_options();
        let mut admin = connect(&server).await.unwrap_or_else(|why| skip(&why));
        let name = format!("{prefix}_{:016x}", rand::random::<u64>());
        sqlx::query(&format!("CREATE DATABASE {name}"))
            .execute(&mut admin)
            .await
            .unwrap_or_else(|e| panic!("CREATE DATABASE {name}: {e}"));
        let _ = admin.close().await;
        let mut url = url::Url::parse(&server_url()).expect("a URL (sqlx parsed it)");
        url.set_path(&format!("/{name}"));
        Self {
            server,
            name,
            url: url.to_string(),
        }
    }

    /// The database's URL, for `--store`.
    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        let server = self.server.clone();
        let name = self.name.clone();
        clean_up(
            &format!("test database {}", self.name),
            move || async move {
                let mut admin = connect(&server).await?;
                sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                    .execute(&mut admin)
                    .await
                    .map_err(|e| format!("DROP DATABASE: {e}"))?;
                admin.close().await.map_err(|e| e.to_string())
            },
        );
    }
}

/// A fresh schema on the test server; dropped on `Drop`. Connections from
/// [`Self::options`] have it as their `search_path` and carry its name as
/// their `application_name`, so the drop can end them first (a test's
/// pools may still be open, on a runtime that is gone).
#[derive(Debug)]
pub struct TestSchema {
    server: PgConnectOptions,
    name: String,
}

impl TestSchema {
    /// Creates `<prefix>_<random>`; ends the test as skipped when no
    /// server answers.
    pub async fn create(prefix: &str) -> Self {
        let server = server_options();
        let mut admin = connect(&server).await.unwrap_or_else(|why| skip(&why));
        let name = format!("{prefix}_{:016x}", rand::random::<u64>());
        sqlx::query(&format!("CREATE SCHEMA {name}"))
            .execute(&mut admin)
            .await
            .unwrap_or_else(|e| panic!("CREATE SCHEMA {name}: {e}"));
        let _ = admin.close().await;
        Self { server, name }
    }

    /// Connect options whose tables live in this schema.
    pub fn options(&self) -> PgConnectOptions {
        self.server
            .clone()
            .options([("search_path", self.name.as_str())])
            .application_name(&self.name)
    }

    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for TestSchema {
    fn drop(&mut self) {
        let server = self.server.clone();
        let name = self.name.clone();
        clean_up(&format!("test schema {}", self.name), move || async move {
            let mut admin = connect(&server).await?;
            sqlx::query(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                 WHERE application_name = $1 AND pid <> pg_backend_pid()",
            )
            .bind(&name)
            .execute(&mut admin)
            .await
            .map_err(|e| e.to_string())?;
            sqlx::query("SET lock_timeout = '10s'")
                .execute(&mut admin)
                .await
                .map_err(|e| e.to_string())?;
            sqlx::query(&format!("DROP SCHEMA IF EXISTS {name} CASCADE"))
                .execute(&mut admin)
                .await
                .map_err(|e| e.to_string())?;
            admin.close().await.map_err(|e| e.to_string())
        });
    }
}
