-- Two costs off every post (issue #24; docs/PERFORMANCE.md, "Writes over
-- HTTP"), both paid on the one writer thread and both made of short-lived
-- allocations that contended for malloc's locks with the HTTP threads:
--
-- 1. `notifications.kind` was checked with `IN` over four values, which
--    SQLite evaluates by filling a temporary b-tree at each INSERT (a page
--    cache opened and freed per notification). The same rule, written as
--    comparisons, needs none. SQLite cannot change a CHECK in place, so the
--    table is made again (https://sqlite.org/lang_altertable.html, "Making
--    Other Kinds Of Table Schema Changes"); no table refers to it.
-- 2. The AFTER INSERT triggers on posts (0004) made each INSERT a statement
--    of several writes, which with the table's immediate foreign keys may
--    abort halfway: SQLite then keeps a statement journal, a copy of every
--    page the INSERT changes. The store indexes or queues a new post's words
--    itself now (`search_queue::post_added`), as `pith seed` and
--    `pith migrate` do; a post another program inserts is indexed when Pith
--    next opens the file (`search_queue::index_unindexed_posts`). Edits and
--    deletions keep their triggers.
CREATE TABLE notifications_new (
    id         INTEGER PRIMARY KEY,
    user_id    INTEGER NOT NULL REFERENCES users(id),
    kind       TEXT    NOT NULL
        CHECK (kind = 'reply' OR kind = 'mention' OR kind = 'message' OR kind = 'moderation'),
    from_id    INTEGER REFERENCES users(id),
    topic_id   INTEGER REFERENCES topics(id),
    post_id    INTEGER REFERENCES posts(id),
    excerpt    TEXT    NOT NULL DEFAULT '',
    created_at INTEGER NOT NULL,
    read       INTEGER NOT NULL DEFAULT 0
);
INSERT INTO notifications_new (id, user_id, kind, from_id, topic_id, post_id, excerpt, created_at, read)
    SELECT id, user_id, kind, from_id, topic_id, post_id, excerpt, created_at, read FROM notifications;
DROP TABLE notifications;
ALTER TABLE notifications_new RENAME TO notifications;
CREATE INDEX notifications_user ON notifications(user_id, id);
CREATE INDEX notifications_unread ON notifications(user_id) WHERE read = 0;

DROP TRIGGER posts_fts_insert;
DROP TRIGGER posts_fts_insert_queued;
