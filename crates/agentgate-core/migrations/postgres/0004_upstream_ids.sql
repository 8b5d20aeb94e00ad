-- Which principal each upstream id belongs to (a Q Business conversation,
-- an A2A context): the first principal an upstream id was bound to owns it,
-- and a backend refuses it to every other principal like an unknown id.
CREATE TABLE upstream_ids (
    namespace   TEXT NOT NULL,
    upstream_id TEXT NOT NULL,
    owner       TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    PRIMARY KEY (namespace, upstream_id)
);
