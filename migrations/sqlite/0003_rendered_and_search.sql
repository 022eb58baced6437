-- Rendered Markdown and full-text search (issue #4).

-- Bodies rendered to sanitized HTML once, when written, so no read renders.
-- NULL means "not rendered yet": rows that predate this migration, or that
-- `pith seed` wrote straight into the tables. The store renders them when
-- it opens the database (src/store/sqlite/backfill.rs), in Rust, since
-- SQL cannot call the renderer; the partial indexes make finding them free
-- once there are none. A topic without a body keeps body_html NULL.
ALTER TABLE posts ADD COLUMN body_html TEXT;
ALTER TABLE topics ADD COLUMN body_html TEXT;
CREATE INDEX posts_unrendered ON posts(id) WHERE body_html IS NULL;
CREATE INDEX topics_unrendered ON topics(id) WHERE body_html IS NULL AND body IS NOT NULL;

-- External-content FTS5 indexes: the text lives once, in the tables above.
-- They index exactly the rows the public may read by their own flags (not
-- deleted, not removed), kept so by the triggers below, whichever code
-- writes; searches also check the topic of a post (a removed topic hides
-- its replies). Never run the 'rebuild' command on them: it would index
-- every row, removed ones included.
-- porter: "cards" finds "card"; remove_diacritics 2: "cafe" finds "café".
CREATE VIRTUAL TABLE topics_fts USING fts5(
    title, body,
    content = 'topics', content_rowid = 'id',
    tokenize = 'porter unicode61 remove_diacritics 2'
);
CREATE VIRTUAL TABLE posts_fts USING fts5(
    body,
    content = 'posts', content_rowid = 'id',
    tokenize = 'porter unicode61 remove_diacritics 2'
);
-- BM25 with a match in the title worth five in the body: a topic that names
-- a word in its title is about it.
INSERT INTO topics_fts (topics_fts, rank) VALUES ('rank', 'bm25(5.0, 1.0)');

INSERT INTO topics_fts (rowid, title, body)
    SELECT id, title, body FROM topics WHERE deleted = 0 AND removed = 0;
INSERT INTO posts_fts (rowid, body)
    SELECT id, body FROM posts WHERE deleted = 0 AND removed = 0;

-- An external-content index forgets a row only when told the exact text it
-- indexed, so each change removes the old text (if it was visible) and adds
-- the new (if it is). Votes (score, hot) and body_html fire nothing.
CREATE TRIGGER topics_fts_insert AFTER INSERT ON topics
WHEN new.deleted = 0 AND new.removed = 0 BEGIN
    INSERT INTO topics_fts (rowid, title, body) VALUES (new.id, new.title, new.body);
END;
CREATE TRIGGER topics_fts_update AFTER UPDATE OF title, body, deleted, removed ON topics BEGIN
    INSERT INTO topics_fts (topics_fts, rowid, title, body)
        SELECT 'delete', old.id, old.title, old.body WHERE old.deleted = 0 AND old.removed = 0;
    INSERT INTO topics_fts (rowid, title, body)
        SELECT new.id, new.title, new.body WHERE new.deleted = 0 AND new.removed = 0;
END;
CREATE TRIGGER topics_fts_delete AFTER DELETE ON topics
WHEN old.deleted = 0 AND old.removed = 0 BEGIN
    INSERT INTO topics_fts (topics_fts, rowid, title, body) VALUES ('delete', old.id, old.title, old.body);
END;

CREATE TRIGGER posts_fts_insert AFTER INSERT ON posts
WHEN new.deleted = 0 AND new.removed = 0 BEGIN
    INSERT INTO posts_fts (rowid, body) VALUES (new.id, new.body);
END;
CREATE TRIGGER posts_fts_update AFTER UPDATE OF body, deleted, removed ON posts BEGIN
    INSERT INTO posts_fts (posts_fts, rowid, body)
        SELECT 'delete', old.id, old.body WHERE old.deleted = 0 AND old.removed = 0;
    INSERT INTO posts_fts (rowid, body)
        SELECT new.id, new.body WHERE new.deleted = 0 AND new.removed = 0;
END;
CREATE TRIGGER posts_fts_delete AFTER DELETE ON posts
WHEN old.deleted = 0 AND old.removed = 0 BEGIN
    INSERT INTO posts_fts (posts_fts, rowid, body) VALUES ('delete', old.id, old.body);
END;
