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
