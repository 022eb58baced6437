-- Pictures (issue #22). Each stored picture is a file under DATA_DIR/media/
-- named by its content (src/media/name.rs), with this row: who uploaded it
-- first (NULL once that account is deleted), its size on disk (picture and
-- thumbnail together: what quotas count), its pixels and type.
-- `freed_at`: when the last topic or post that showed it was deleted; such
-- a row and its files are removed right after (`Store::take_freed_media`),
-- or by `pith media gc` if the process stopped in between.
CREATE TABLE media (
    name         TEXT    PRIMARY KEY,
    owner_id     INTEGER REFERENCES users(id),
    bytes        INTEGER NOT NULL,
    width        INTEGER NOT NULL,
    height       INTEGER NOT NULL,
    content_type TEXT    NOT NULL,
    created_at   INTEGER NOT NULL,
    freed_at     INTEGER
);
CREATE INDEX media_owner ON media(owner_id);
CREATE INDEX media_freed ON media(freed_at) WHERE freed_at IS NOT NULL;

-- Which topic (kind 0) or post (kind 1) shows which picture: each body's
-- `/media/NAME` links, parsed when the body is written.
CREATE TABLE media_refs (
    media     TEXT    NOT NULL REFERENCES media(name),
    kind      INTEGER NOT NULL,
    target_id INTEGER NOT NULL,
    PRIMARY KEY (kind, target_id, media)
) WITHOUT ROWID;
CREATE INDEX media_refs_media ON media_refs(media);
