-- The per-principal storage quota (`limits.max_stored_tasks`,
-- `limits.max_stored_bytes`; `stored_usage`): how many bytes of JSON and
-- text a task's row holds (arguments, status message, state, input
-- requests and answers, result, error). Computed by SQLite from the row, so
-- no write can forget to keep it up to date; kept in the index below, so
-- summing an owner's usage reads index entries only, never a row.
ALTER TABLE tasks ADD COLUMN stored_bytes INTEGER GENERATED ALWAYS AS (
    length(CAST(args AS BLOB))
    + COALESCE(length(CAST(status_message AS BLOB)), 0)
    + COALESCE(length(CAST(job_state AS BLOB)), 0)
    + length(CAST(input_requests AS BLOB))
    + length(CAST(input_responses AS BLOB))
    + length(CAST(used_input_keys AS BLOB))
    + COALESCE(length(CAST(result AS BLOB)), 0)
    + COALESCE(length(CAST(error AS BLOB)), 0)
) VIRTUAL;

-- `stored_usage` walks an owner's entries (at most the task quota of them);
-- `oldest_ended` finds the owner's ended task the sweeper deletes first.
CREATE INDEX tasks_owner_stored ON tasks (owner, status, updated_at, stored_bytes);
