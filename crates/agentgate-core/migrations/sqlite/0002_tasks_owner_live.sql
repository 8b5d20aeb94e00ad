-- `count_active`: the live tasks of one owner (the per-principal cap on
-- concurrent tasks), without scanning ended tasks.
CREATE INDEX tasks_owner_live ON tasks (owner) WHERE status IN ('working', 'input_required');
