-- A task's TTL counts from its last progress, not from its creation (issue
-- 32): a live agent is never expired by the clock alone, and an ended task's
-- result is kept for its TTL after it ended. `expires_at` was generated from
-- `created_at + ttl_ms`; it becomes a plain column the store moves forward on
-- each step that gets somewhere (`transition::apply`). Dropping the
-- expression keeps every row's value and the index on it.
ALTER TABLE tasks ALTER COLUMN expires_at DROP EXPRESSION;
