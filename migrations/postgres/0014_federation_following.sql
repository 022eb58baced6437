-- Phase 2 of federation: migrations/sqlite/0015_federation_following.sql,
-- which explains it.
ALTER TABLE communities ADD COLUMN actor BIGINT REFERENCES ap_actors(id);
CREATE UNIQUE INDEX communities_actor ON communities(actor) WHERE actor IS NOT NULL;

CREATE TABLE ap_following (
    community_id BIGINT  NOT NULL REFERENCES communities(id),
    user_id      BIGINT  NOT NULL REFERENCES users(id),
    follow_id    TEXT    NOT NULL UNIQUE,
    accepted     BOOLEAN NOT NULL DEFAULT FALSE,
    created_at   BIGINT  NOT NULL,
    PRIMARY KEY (community_id, user_id)
);
