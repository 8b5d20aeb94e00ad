-- `tasks/list` (the 2025-11-25 task wire): an owner's tasks, newest first,
-- a page at a time from a cursor (created_at, id). One range of this index
-- per page, however many tasks the owner or anyone else has. Ids compare
-- byte by byte, as on SQLite, whatever the database's locale.
CREATE INDEX tasks_owner_created ON tasks (owner, created_at, id COLLATE "C");
