-- `claim` and `next_due`: when a live task can next be claimed, the later of
-- its due time and the end of its lease (NULL for a task that waits for
-- input or has ended). Computed by SQLite from the row, so no write can
-- forget it, and indexed, so finding the next runnable task reads one index
-- entry instead of scanning every live task.
ALTER TABLE tasks ADD COLUMN runnable_at INTEGER GENERATED ALWAYS AS (
    CASE WHEN status IN ('working', 'input_required') AND due_at IS NOT NULL
         THEN MAX(due_at, COALESCE(lease_until, 0)) END
) VIRTUAL;

CREATE INDEX tasks_runnable ON tasks (runnable_at) WHERE runnable_at IS NOT NULL;

-- Served by tasks_runnable now; one index fewer to keep up on every write.
DROP INDEX tasks_due;

-- `count_active`: the end of a task's TTL (NULL: none), so counting an
-- owner's live, unexpired tasks reads the index alone, never a row.
ALTER TABLE tasks ADD COLUMN expires_at INTEGER GENERATED ALWAYS AS (created_at + ttl_ms) VIRTUAL;

CREATE INDEX tasks_owner_live_expiry ON tasks (owner, expires_at)
    WHERE status IN ('working', 'input_required');

DROP INDEX tasks_owner_live;
