//! Saving a batch of checkpoints on PostgreSQL (the batching itself is
//! [`crate::store::checkpoints`]): one transaction that locks every row
//! (in id order, so two instances' overlapping batches cannot deadlock),
//! writes each saved task, and sends one `NOTIFY` naming them all (a few if
//! the ids overflow the payload limit).

use std::collections::HashMap;

use async_trait::async_trait;
use sqlx::types::Json;
use sqlx::{PgPool, Row as _};

use super::{CHANNEL, decode};
use crate::store::StoreResult;
use crate::store::checkpoints::{Checkpoint, SaveCheckpoints, decide};
use crate::task::TaskRecord;

/// The longest `NOTIFY` payload sent (PostgreSQL's limit is 8000 bytes).
const MAX_PAYLOAD: usize = 7_000;

#[derive(Debug)]
pub(super) struct PgCheckpoints {
    pub(super) pool: PgPool,
}

#[async_trait]
impl SaveCheckpoints for PgCheckpoints {
    async fn save(&self, batch: &[Checkpoint]) -> StoreResult<Vec<StoreResult<TaskRecord>>> {
        let mut tx = self.pool.begin().await?;
        let ids: Vec<&str> = batch.iter().map(|one| one.id.as_str()).collect();
        let rows = sqlx::query("SELECT * FROM tasks WHERE id = ANY($1) ORDER BY id FOR UPDATE")
            .bind(&ids)
            .fetch_all(&mut *tx)
            .await?;
        let mut current = HashMap::with_capacity(rows.len());
        for row in rows {
            current.insert(row.try_get::<String, _>("id")?, decode(row));
        }
        let decided = decide(batch, current);
        for task in &decided.writes {
            update(&mut tx, task).await?;
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
        Ok(decided.results)
    }
}

/// Writes a decided task back, if the lease's fence is still `task.fence`.
async fn update(tx: &mut sqlx::PgConnection, task: &TaskRecord) -> StoreResult<()> {
    sqlx::query(
        "UPDATE tasks SET status = $1, status_message = $2, job_state = $3, \
         input_requests = $4, input_responses = $5, used_input_keys = $6, result = $7, \
         error = $8, updated_at = $9, due_at = $10, lease_owner = NULL, lease_until = NULL, \
         steps = $11, failures = $12 WHERE id = $13 AND attempt = $14",
    )
    .bind(task.status.as_str())
    .bind(&task.status_message)
    .bind(&task.job_state)
    .bind(Json(&task.input_requests))
    .bind(Json(&task.input_responses))
    .bind(Json(&task.used_input_keys))
    .bind(&task.result)
    .bind(&task.error)
    .bind(task.updated_at)
    .bind(task.due_at)
    .bind(task.steps)
    .bind(task.failures)
    .bind(task.id.as_str())
    .bind(task.fence)
    .execute(&mut *tx)
    .await?;
    Ok(())
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
