//! Saving a batch of writes on PostgreSQL (the batching itself is
//! [`crate::store::group_commit`]; the store queues only checkpoints, see
//! `PostgresStore::insert`, but a batch may hold any write): one
//! transaction that inserts the new tasks, locks every checkpointed row (in id order, so two
//! instances' overlapping batches cannot deadlock), writes the saved tasks
//! back in one statement, and sends one `NOTIFY` naming them all (a few if
//! the ids overflow the payload limit).

use std::collections::HashMap;

use agentgate_backend::Millis;
use async_trait::async_trait;
use sqlx::{PgPool, Row as _};

use super::{CHANNEL, SERVER_NOW, decode};
use crate::store::StoreResult;
use crate::store::group_commit::{SaveBatch, Write, decide, in_batch_order};
use crate::task::{NewTask, TaskRecord};

/// The longest `NOTIFY` payload sent (PostgreSQL's limit is 8000 bytes).
const MAX_PAYLOAD: usize = 7_000;

#[derive(Debug)]
pub(super) struct PgWriter {
    pub(super) pool: PgPool,
}

#[async_trait]
impl SaveBatch for PgWriter {
    async fn save(&self, batch: &[Write]) -> StoreResult<Vec<StoreResult<TaskRecord>>> {
        if let [Write::Insert { task, lease }] = batch {
            // Alone, an insert is its own transaction: one round trip
            // instead of BEGIN, INSERT and COMMIT.
            let lease = lease
                .as_ref()
                .map(|(worker, until)| (worker.as_str(), *until));
            let mut conn = self.pool.acquire().await?;
            return Ok(vec![insert_row(&mut conn, task, lease).await?]);
        }
        let mut tx = self.pool.begin().await?;
        let mut inserted = Vec::new();
        for (task, lease) in batch.iter().filter_map(Write::as_insert) {
            inserted.push(insert_row(&mut tx, task, lease).await?);
        }
        let checkpoints: Vec<_> = batch.iter().filter_map(Write::as_checkpoint).collect();
        let mut current = HashMap::with_capacity(checkpoints.len());
        if !checkpoints.is_empty() {
            let ids: Vec<&str> = checkpoints.iter().map(|one| one.id.as_str()).collect();
            let rows = sqlx::query("SELECT * FROM tasks WHERE id = ANY($1) ORDER BY id FOR UPDATE")
                // Planned with its ids each time (see `update`).
                .persistent(false)
                .bind(&ids)
                .fetch_all(&mut *tx)
                .await?;
            for row in rows {
                current.insert(row.try_get::<String, _>("id")?, decode(row));
            }
        }
        let decided = decide(&checkpoints, current);
        if !decided.writes.is_empty() {
            update(&mut tx, &decided.writes).await?;
        }
        let saved: Vec<&str> = decided.writes.iter().map(|t| t.id.as_str()).collect();
        for payload in notices(&saved) {
            sqlx::query("SELECT pg_notify($1, $2)")
                .bind(CHANNEL)
                .bind(payload)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(in_batch_order(batch, inserted, decided.results))
    }
}

/// Inserts one new task (in a batch's transaction, or committed by itself).
/// The outer `Err` is the database's; the inner one a row that does not
/// decode.
pub(super) async fn insert_row(
    tx: &mut sqlx::PgConnection,
    task: &NewTask,
    lease: Option<(&str, Millis)>,
) -> StoreResult<StoreResult<TaskRecord>> {
    // The lease's end on the server's clock too (see the store's module
    // docs), as long after the server's time as the caller asked for.
    let row = sqlx::query(&format!(
        "INSERT INTO tasks (id, owner, tool, args, status, status_message, created_at, \
         updated_at, ttl_ms, due_at, lease_owner, lease_until, fence, lease_server_until, \
         expires_at) \
         VALUES ($1, $2, $3, $4, 'working', $5, $6, $6, $7, $6, $8, $9, $10, \
         {SERVER_NOW} + $11, $12) RETURNING *",
    ))
    .bind(task.id.as_str())
    .bind(task.owner.as_str())
    .bind(&task.tool)
    .bind(&task.args)
    .bind(&task.status_message)
    .bind(task.now)
    .bind(task.ttl_ms.map(|t| i64::try_from(t).unwrap_or(i64::MAX)))
    .bind(lease.map(|(worker, _)| worker))
    .bind(lease.map(|(_, until)| until))
    .bind(i64::from(lease.is_some()))
    .bind(lease.map(|(_, until)| super::lease_ms(until.since(task.now))))
    .bind(task.expires_at())
    .fetch_one(&mut *tx)
    .await?;
    Ok(decode(row))
}

/// Writes the decided tasks back, each if its lease's fence is still
/// `task.fence`: one statement for the whole batch (the columns as arrays),
/// not one round trip per task.
///
/// Not a prepared statement (`persistent(false)`), like the batch's
/// `SELECT … FOR UPDATE`: PostgreSQL plans an unnamed statement with its
/// actual arrays, so it finds the rows by primary key. A prepared one
/// switches to a generic plan after five runs, costed while the table was
/// small (a sequential scan and a hash join), and keeps it on that
/// connection as the table grows: every checkpoint batch then read the whole
/// table (seen in the bench: 1.2 million rows read in 2 s at 2 000 tasks).
async fn update(tx: &mut sqlx::PgConnection, tasks: &[TaskRecord]) -> StoreResult<()> {
    sqlx::query(
        "UPDATE tasks SET status = u.status, status_message = u.status_message, \
         job_state = u.job_state, input_requests = u.input_requests, \
         input_responses = u.input_responses, used_input_keys = u.used_input_keys, \
         result = u.result, error = u.error, updated_at = u.updated_at, due_at = u.due_at, \
         expires_at = u.expires_at, lease_owner = NULL, lease_until = NULL, \
         lease_server_until = NULL, steps = u.steps, failures = u.failures \
         FROM UNNEST($1::text[], $2::text[], $3::text[], $4::jsonb[], $5::jsonb[], $6::jsonb[], \
                     $7::jsonb[], $8::jsonb[], $9::jsonb[], $10::bigint[], $11::bigint[], \
                     $12::bigint[], $13::bigint[], $14::bigint[], $15::bigint[]) \
           AS u(id, status, status_message, job_state, input_requests, input_responses, \
                used_input_keys, result, error, updated_at, due_at, steps, failures, fence, \
                expires_at) \
         WHERE tasks.id = u.id AND tasks.fence = u.fence",
    )
    .persistent(false)
    .bind(tasks.iter().map(|t| t.id.as_str()).collect::<Vec<_>>())
    .bind(tasks.iter().map(|t| t.status.as_str()).collect::<Vec<_>>())
    .bind(
        tasks
            .iter()
            .map(|t| t.status_message.as_deref())
            .collect::<Vec<_>>(),
    )
    .bind(
        tasks
            .iter()
            .map(|t| t.job_state.clone())
            .collect::<Vec<_>>(),
    )
    .bind(
        tasks
            .iter()
            .map(|t| to_json(&t.input_requests))
            .collect::<Vec<_>>(),
    )
    .bind(
        tasks
            .iter()
            .map(|t| to_json(&t.input_responses))
            .collect::<Vec<_>>(),
    )
    .bind(
        tasks
            .iter()
            .map(|t| to_json(&t.used_input_keys))
            .collect::<Vec<_>>(),
    )
    .bind(tasks.iter().map(|t| t.result.clone()).collect::<Vec<_>>())
    .bind(tasks.iter().map(|t| t.error.clone()).collect::<Vec<_>>())
    .bind(
        tasks
            .iter()
            .map(|t| t.updated_at.unix_ms())
            .collect::<Vec<_>>(),
    )
    .bind(
        tasks
            .iter()
            .map(|t| t.due_at.map(Millis::unix_ms))
            .collect::<Vec<_>>(),
    )
    .bind(tasks.iter().map(|t| t.steps).collect::<Vec<_>>())
    .bind(tasks.iter().map(|t| t.failures).collect::<Vec<_>>())
    .bind(tasks.iter().map(|t| t.fence.raw()).collect::<Vec<_>>())
    .bind(
        tasks
            .iter()
            .map(|t| t.expires_at.map(Millis::unix_ms))
            .collect::<Vec<_>>(),
    )
    .execute(&mut *tx)
    .await?;
    Ok(())
}

/// A map or list of JSON values as one JSON value (which cannot fail).
fn to_json(value: &impl serde::Serialize) -> serde_json::Value {
    serde_json::to_value(value).unwrap_or(serde_json::Value::Null)
}

/// `NOTIFY` payloads naming the saved tasks: `u:` and the ids separated by
/// spaces (task ids never hold one), each payload under PostgreSQL's limit.
fn notices(ids: &[&str]) -> Vec<String> {
    let mut payloads = Vec::new();
    let mut payload = String::new();
    for id in ids {
        if !payload.is_empty() && payload.len() + 1 + id.len() > MAX_PAYLOAD {
            payloads.push(std::mem::take(&mut payload));
        }
        payload.push_str(if payload.is_empty() { "u:" } else { " " });
        payload.push_str(id);
    }
    if !payload.is_empty() {
        payloads.push(payload);
    }
    payloads
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notices_name_every_id_within_the_payload_limit() {
        let ids: Vec<String> = (0..1000).map(|n| format!("{n:027}")).collect();
        let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
        let payloads = notices(&refs);
        assert!(payloads.len() > 1);
        assert!(
            payloads
                .iter()
                .all(|p| p.len() <= MAX_PAYLOAD && p.starts_with("u:"))
        );
        let heard: Vec<&str> = payloads
            .iter()
            .flat_map(|p| p["u:".len()..].split(' '))
            .collect();
        assert_eq!(heard, refs);
        assert!(notices(&[]).is_empty());
    }
}
