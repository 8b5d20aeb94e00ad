-- A task's TTL counts from its last progress, not from its creation (issue
-- 32): a live agent is never expired by the clock alone, and an ended task's
-- result is kept for its TTL after it ended. `expires_at` was computed from
-- `created_at + ttl_ms`; it becomes a column the store moves forward on each
-- step that gets somewhere (`transition::apply`). Existing tasks keep the
-- expiry they had. The index `count_active` reads is rebuilt on it.
DROP INDEX tasks_owner_live_expiry;
ALTER TABLE tasks DROP COLUMN expires_at;
ALTER TABLE tasks ADD COLUMN expires_at INTEGER;
UPDATE tasks SET expires_at = created_at + ttl_ms WHERE ttl_ms IS NOT NULL;
CREATE INDEX tasks_owner_live_expiry ON tasks (owner, expires_at)
    WHERE status IN ('working', 'input_required');
