-- The inbox (issue #21): one row per notification a user gets. Written in
-- the transaction of the write that causes it (a reply, a mention, a
-- moderator's action), so an acknowledged write's notifications are kept.
-- `kind` already allows 'message' for private messages, which will point
-- at their message through a column of their own; `topic_id`/`post_id`
-- say where the others happened. `from_id` is who caused it (NULL: no one
-- to show). `excerpt` is plain text, at most 140 characters.
CREATE TABLE notifications (
    id         INTEGER PRIMARY KEY,
    user_id    INTEGER NOT NULL REFERENCES users(id),
    kind       TEXT    NOT NULL CHECK (kind IN ('reply', 'mention', 'message', 'moderation')),
    from_id    INTEGER REFERENCES users(id),
    topic_id   INTEGER REFERENCES topics(id),
    post_id    INTEGER REFERENCES posts(id),
    excerpt    TEXT    NOT NULL DEFAULT '',
    created_at INTEGER NOT NULL,
    read       INTEGER NOT NULL DEFAULT 0
);
-- A user's inbox, newest first, and their unread count.
CREATE INDEX notifications_user ON notifications(user_id, id);
CREATE INDEX notifications_unread ON notifications(user_id) WHERE read = 0;
