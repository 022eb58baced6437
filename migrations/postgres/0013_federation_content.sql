-- Federation's inbound content: migrations/sqlite/0014_federation_content.sql,
-- which explains it.
ALTER TABLE users ADD COLUMN actor BIGINT REFERENCES ap_actors(id);
CREATE UNIQUE INDEX users_actor ON users(actor) WHERE actor IS NOT NULL;

ALTER TABLE ap_actors ADD COLUMN url TEXT;

CREATE TABLE ap_objects (
    object_id TEXT   NOT NULL PRIMARY KEY,
    kind      BIGINT NOT NULL,
    local_id  BIGINT NOT NULL,
    topic_id  BIGINT NOT NULL,
    UNIQUE (kind, local_id)
);
