-- The end of a task's lease on the database server's clock (Unix ms; NULL
-- when no lease is held, or for one granted before this migration).
-- `lease_until` stays on the holder's clock, for `runnable_at` and
-- `next_due`; a claim also needs this one to have passed by the server's
-- own time, so an instance whose clock runs ahead cannot take over a live
-- lease and run the same step twice. Nullable without a default: adding
-- it does not rewrite the table.
ALTER TABLE tasks ADD COLUMN lease_server_until BIGINT;
