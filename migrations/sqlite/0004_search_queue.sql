-- Pith's writer hands the search indexes each group commit's changes at
-- once (issue #8).
--
-- FTS5 writes the terms it holds in memory to disk as a new segment at
-- every savepoint (its xSavepoint and xRelease methods), and the writer
-- runs each write of a group commit in a savepoint of its own: with the
-- triggers of 0003 indexing at once, every reply wrote a segment and FTS5
-- spent the rest merging them (about 40 % of the writer thread's time
-- under 400 concurrent writers).
--
-- So while `fts_defer.deferred` is 1 the triggers queue what they would
-- tell the indexes, in order, with the exact text; the writer sets it at
-- the start of each batch transaction and, before COMMIT, applies the
-- queue with one statement per index and sets it back
-- (src/store/sqlite/search_queue.rs). The flag is only ever 1 inside that
-- uncommitted transaction: every other program writing the file (the C
-- design of bench/c, the sqlite3 shell, `pith migrate`) sees 0 and indexes
-- directly with the triggers of 0003, unchanged, and a committed database
-- never holds a queued change.
CREATE TABLE fts_defer (deferred INTEGER NOT NULL);
INSERT INTO fts_defer (deferred) VALUES (0);

CREATE TABLE fts_queue (
    seq INTEGER PRIMARY KEY,
    -- 0: topics_fts, 1: posts_fts
    posts INTEGER NOT NULL,
    -- 'delete' to forget the text below, NULL to index it
    command TEXT,
    item INTEGER NOT NULL,
    title TEXT,
    body TEXT
);

DROP TRIGGER topics_fts_insert;
DROP TRIGGER topics_fts_update;
DROP TRIGGER topics_fts_delete;
DROP TRIGGER posts_fts_insert;
DROP TRIGGER posts_fts_update;
DROP TRIGGER posts_fts_delete;

-- Indexing at once, as in 0003, when nothing defers it.
CREATE TRIGGER topics_fts_insert AFTER INSERT ON topics
WHEN new.deleted = 0 AND new.removed = 0 AND NOT (SELECT deferred FROM fts_defer) BEGIN
    INSERT INTO topics_fts (rowid, title, body) VALUES (new.id, new.title, new.body);
END;
CREATE TRIGGER topics_fts_update AFTER UPDATE OF title, body, deleted, removed ON topics
WHEN NOT (SELECT deferred FROM fts_defer) BEGIN
    INSERT INTO topics_fts (topics_fts, rowid, title, body)
        SELECT 'delete', old.id, old.title, old.body WHERE old.deleted = 0 AND old.removed = 0;
    INSERT INTO topics_fts (rowid, title, body)
        SELECT new.id, new.title, new.body WHERE new.deleted = 0 AND new.removed = 0;
END;
CREATE TRIGGER topics_fts_delete AFTER DELETE ON topics
WHEN old.deleted = 0 AND old.removed = 0 AND NOT (SELECT deferred FROM fts_defer) BEGIN
    INSERT INTO topics_fts (topics_fts, rowid, title, body) VALUES ('delete', old.id, old.title, old.body);
END;
CREATE TRIGGER posts_fts_insert AFTER INSERT ON posts
WHEN new.deleted = 0 AND new.removed = 0 AND NOT (SELECT deferred FROM fts_defer) BEGIN
    INSERT INTO posts_fts (rowid, body) VALUES (new.id, new.body);
END;
CREATE TRIGGER posts_fts_update AFTER UPDATE OF body, deleted, removed ON posts
WHEN NOT (SELECT deferred FROM fts_defer) BEGIN
    INSERT INTO posts_fts (posts_fts, rowid, body)
        SELECT 'delete', old.id, old.body WHERE old.deleted = 0 AND old.removed = 0;
    INSERT INTO posts_fts (rowid, body)
        SELECT new.id, new.body WHERE new.deleted = 0 AND new.removed = 0;
END;
CREATE TRIGGER posts_fts_delete AFTER DELETE ON posts
WHEN old.deleted = 0 AND old.removed = 0 AND NOT (SELECT deferred FROM fts_defer) BEGIN
    INSERT INTO posts_fts (posts_fts, rowid, body) VALUES ('delete', old.id, old.body);
END;

-- The same changes queued, inside Pith's batch transactions.
CREATE TRIGGER topics_fts_insert_queued AFTER INSERT ON topics
WHEN new.deleted = 0 AND new.removed = 0 AND (SELECT deferred FROM fts_defer) BEGIN
    INSERT INTO fts_queue (posts, command, item, title, body) VALUES (0, NULL, new.id, new.title, new.body);
END;
CREATE TRIGGER topics_fts_update_queued AFTER UPDATE OF title, body, deleted, removed ON topics
WHEN (SELECT deferred FROM fts_defer) BEGIN
    INSERT INTO fts_queue (posts, command, item, title, body)
        SELECT 0, 'delete', old.id, old.title, old.body WHERE old.deleted = 0 AND old.removed = 0;
    INSERT INTO fts_queue (posts, command, item, title, body)
        SELECT 0, NULL, new.id, new.title, new.body WHERE new.deleted = 0 AND new.removed = 0;
END;
CREATE TRIGGER topics_fts_delete_queued AFTER DELETE ON topics
WHEN old.deleted = 0 AND old.removed = 0 AND (SELECT deferred FROM fts_defer) BEGIN
    INSERT INTO fts_queue (posts, command, item, title, body) VALUES (0, 'delete', old.id, old.title, old.body);
END;
CREATE TRIGGER posts_fts_insert_queued AFTER INSERT ON posts
WHEN new.deleted = 0 AND new.removed = 0 AND (SELECT deferred FROM fts_defer) BEGIN
    INSERT INTO fts_queue (posts, command, item, body) VALUES (1, NULL, new.id, new.body);
END;
CREATE TRIGGER posts_fts_update_queued AFTER UPDATE OF body, deleted, removed ON posts
WHEN (SELECT deferred FROM fts_defer) BEGIN
    INSERT INTO fts_queue (posts, command, item, body)
        SELECT 1, 'delete', old.id, old.body WHERE old.deleted = 0 AND old.removed = 0;
    INSERT INTO fts_queue (posts, command, item, body)
        SELECT 1, NULL, new.id, new.body WHERE new.deleted = 0 AND new.removed = 0;
END;
CREATE TRIGGER posts_fts_delete_queued AFTER DELETE ON posts
WHEN old.deleted = 0 AND old.removed = 0 AND (SELECT deferred FROM fts_defer) BEGIN
    INSERT INTO fts_queue (posts, command, item, body) VALUES (1, 'delete', old.id, old.body);
END;
