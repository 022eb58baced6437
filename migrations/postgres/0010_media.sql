-- Pictures (issue #22): the tables of migrations/sqlite/0011_media.sql,
-- which explains them.
CREATE TABLE media (
    name         TEXT    PRIMARY KEY,
    owner_id     BIGINT  REFERENCES users(id),
    bytes        BIGINT  NOT NULL,
    width        BIGINT  NOT NULL,
    height       BIGINT  NOT NULL,
    content_type TEXT    NOT NULL,
    created_at   BIGINT  NOT NULL,
    freed_at     BIGINT
);
CREATE INDEX media_owner ON media(owner_id);
CREATE INDEX media_freed ON media(freed_at) WHERE freed_at IS NOT NULL;

CREATE TABLE media_refs (
    media     TEXT   NOT NULL REFERENCES media(name),
    kind      BIGINT NOT NULL,
    target_id BIGINT NOT NULL,
    PRIMARY KEY (kind, target_id, media)
);
CREATE INDEX media_refs_media ON media_refs(media);
