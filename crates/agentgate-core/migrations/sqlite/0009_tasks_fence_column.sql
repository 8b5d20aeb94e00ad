-- The lease's fencing token was stored in a column named `attempt` (its
-- first meaning); the code has called it the fence for a long time. The
-- column now says what it holds. SQLite renames the references to it too.
ALTER TABLE tasks RENAME COLUMN attempt TO fence;
