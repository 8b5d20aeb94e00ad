//! Filling a store with many tasks quickly, straight through SQL.
//!
//! Two kinds of rows: *completed* tasks for the scale measurement
//! ([`sqlite`], [`postgres`]) and *queued* ones for the scheduler backlog
//! ([`backlog_sqlite`], [`backlog_postgres`]). Both insert only ordinary
//! columns, with the rest left to the schema's defaults, so a migration that
//! adds a generated column does not break them.
//!
//! Creating a million tasks through `tools/call` would take longer than the
//! rest of the run, so the scale measurement seeds the `tasks` table with one
//! bulk `INSERT … SELECT` (a recursive CTE in SQLite, `generate_series` in
//! PostgreSQL) after the store's own migrations created the schema. Seeded
//! rows are ordinary `completed` tasks of the bench tool owned by the
//! anonymous HTTP principal, so `tasks/get` over HTTP reads, decodes and
//! serializes them exactly like tasks the gateway created itself.
//!
//! Ids are 27 characters like real ones, `seed` + 8 hex digits of a
//! multiplicative hash of `n` + `n` in 15 digits: unique, and inserted in an
//! order unrelated to key order (as random ids are), so the primary-key
//! B-tree is shaped like a real store's rather than packed by sequential keys.

use anyhow::Context as _;
use sqlx::Connection as _;

/// The id of the `n`th seeded task (the same formula as the SQL below).
pub(crate) fn seeded_id(n: u64) -> String {
    format!(
        "seed{:08x}{n:015}",
        n.wrapping_mul(2_654_435_761) % (1 << 32)
    )
}

/// The stored `result` of a seeded task: what the bench tool returns.
fn stored_result() -> String {
    let result =
        rmcp::model::CallToolResult::success(vec![rmcp::model::ContentBlock::text("slept 0 ms")]);
    serde_json::to_string(&result).unwrap_or_else(|_| "{}".to_owned())
}

const TTL_MS: i64 = 3_600_000;

/// Inserts `count` completed tasks into the SQLite store at `url` (whose
/// schema must exist).
pub(crate) async fn sqlite(url: &str, count: u64) -> anyhow::Result<()> {
    let mut conn = seeding_connection(url).await?;
    let now = chrono::Utc::now().timestamp_millis();
    sqlx::query(
        "WITH RECURSIVE s(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM s WHERE n + 1 < ?1) \
         INSERT INTO tasks (id, owner, tool, args, status, result, created_at, updated_at, ttl_ms, \
                            expires_at) \
         SELECT printf('seed%08x%015d', (n * 2654435761) % 4294967296, n), 'anonymous', \
                'bench_sleep', '{\"ms\":0}', 'completed', ?2, ?3, ?3, ?4, ?3 + ?4 FROM s",
    )
    .bind(i64::try_from(count).unwrap_or(i64::MAX))
    .bind(stored_result())
    .bind(now)
    .bind(TTL_MS)
    .execute(&mut conn)
    .await
    .context("bulk insert into SQLite")?;
    conn.close().await.ok();
    Ok(())
}

/// Inserts `count` completed tasks into the PostgreSQL store at `url`.
pub(crate) async fn postgres(url: &str, count: u64) -> anyhow::Result<()> {
    let mut conn = sqlx::PgConnection::connect(url)
        .await
        .context("connecting to PostgreSQL")?;
    let now = chrono::Utc::now().timestamp_millis();
    sqlx::query(
        "INSERT INTO tasks (id, owner, tool, args, status, result, created_at, updated_at, ttl_ms, \
                            expires_at) \
         SELECT 'seed' || lpad(to_hex((n * 2654435761) % 4294967296), 8, '0') || lpad(n::text, 15, '0'), \
                'anonymous', 'bench_sleep', '{\"ms\":0}'::jsonb, 'completed', $2::jsonb, $3, $3, $4, \
                $3 + $4 \
         FROM generate_series(0::bigint, $1 - 1) AS n",
    )
    .bind(i64::try_from(count).unwrap_or(i64::MAX))
    .bind(stored_result())
    .bind(now)
    .bind(TTL_MS)
    .execute(&mut conn)
    .await
    .context("bulk insert into PostgreSQL")?;
    sqlx::query("ANALYZE tasks").execute(&mut conn).await.ok();
    conn.close().await.ok();
    Ok(())
}

/// A SQLite connection for one big insert: a page cache large enough for
/// the primary-key index of millions of rows (random keys touch pages all
/// over it; with the default 2 MB cache every insert would miss).
async fn seeding_connection(url: &str) -> anyhow::Result<sqlx::SqliteConnection> {
    let mut conn = sqlx::SqliteConnection::connect(url)
        .await
        .with_context(|| format!("connecting to {url}"))?;
    sqlx::query("PRAGMA cache_size = -1048576")
        .execute(&mut conn)
        .await
        .context("sizing the page cache")?;
    Ok(conn)
}

/// Inserts `count` queued tasks into the SQLite store at `url`, as
/// `create` leaves them: `working`, no job state, due now, no lease, no
/// step run yet. The tool's one step finishes them (`ms` = 0).
pub(crate) async fn backlog_sqlite(url: &str, count: u64) -> anyhow::Result<()> {
    let mut conn = seeding_connection(url).await?;
    let now = chrono::Utc::now().timestamp_millis();
    sqlx::query(
        "WITH RECURSIVE s(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM s WHERE n + 1 < ?1) \
         INSERT INTO tasks (id, owner, tool, args, status, status_message, created_at, \
                            updated_at, ttl_ms, due_at, expires_at) \
         SELECT printf('back%08x%015d', (n * 2654435761) % 4294967296, n), 'anonymous', \
                'bench_sleep', '{\"ms\":0}', 'working', 'queued', ?2, ?2, ?3, ?2, ?2 + ?3 FROM s",
    )
    .bind(i64::try_from(count).unwrap_or(i64::MAX))
    .bind(now)
    .bind(TTL_MS)
    .execute(&mut conn)
    .await
    .context("bulk insert of the backlog into SQLite")?;
    conn.close().await.ok();
    Ok(())
}

/// Inserts `count` queued tasks into the PostgreSQL store at `url` (see
/// [`backlog_sqlite`]).
pub(crate) async fn backlog_postgres(url: &str, count: u64) -> anyhow::Result<()> {
    let mut conn = sqlx::PgConnection::connect(url)
        .await
        .context("connecting to PostgreSQL")?;
    let now = chrono::Utc::now().timestamp_millis();
    sqlx::query(
        "INSERT INTO tasks (id, owner, tool, args, status, status_message, created_at, \
                            updated_at, ttl_ms, due_at, expires_at) \
         SELECT 'back' || lpad(to_hex((n * 2654435761) % 4294967296), 8, '0') || lpad(n::text, 15, '0'), \
                'anonymous', 'bench_sleep', '{\"ms\":0}'::jsonb, 'working', 'queued', $2, $2, $3, $2, \
                $2 + $3 \
         FROM generate_series(0::bigint, $1 - 1) AS n",
    )
    .bind(i64::try_from(count).unwrap_or(i64::MAX))
    .bind(now)
    .bind(TTL_MS)
    .execute(&mut conn)
    .await
    .context("bulk insert of the backlog into PostgreSQL")?;
    sqlx::query("ANALYZE tasks").execute(&mut conn).await.ok();
    conn.close().await.ok();
    Ok(())
}

/// Tasks that have not run their first step yet (still `queued`).
pub(crate) async fn unstepped(url: &str) -> anyhow::Result<i64> {
    let sql = "SELECT COUNT(*) FROM tasks WHERE steps = 0";
    if url.starts_with("sqlite:") {
        let mut conn = sqlx::SqliteConnection::connect(url).await?;
        let n: i64 = sqlx::query_scalar(sql).fetch_one(&mut conn).await?;
        conn.close().await.ok();
        Ok(n)
    } else {
        let mut conn = sqlx::PgConnection::connect(url).await?;
        let n: i64 = sqlx::query_scalar(sql).fetch_one(&mut conn).await?;
        conn.close().await.ok();
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::seeded_id;

    #[test]
    fn seeded_ids_are_27_characters_and_unique() {
        assert_eq!(seeded_id(0).len(), 27);
        assert_eq!(seeded_id(999_999).len(), 27);
        assert_ne!(seeded_id(1), seeded_id(2));
        assert_eq!(seeded_id(1), "seed9e3779b1000000000000001");
    }
}
