-- Private messages, their reports, and blocked users (issue #21).

-- A private message: its Markdown as written and as rendered once, at
-- write. `low_id`/`high_id` are the two users in id order, so one index
-- range reads a conversation from either side; `read` is the recipient's.
CREATE TABLE messages (
    id           INTEGER PRIMARY KEY,
    sender_id    INTEGER NOT NULL REFERENCES users(id),
    recipient_id INTEGER NOT NULL REFERENCES users(id),
    low_id       INTEGER NOT NULL,
    high_id      INTEGER NOT NULL,
    body         TEXT    NOT NULL,
    body_html    TEXT    NOT NULL,
    created_at   INTEGER NOT NULL,
    read         INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX messages_pair ON messages(low_id, high_id, id);

-- Each user's list of conversations: one row per other user, with the
-- last message either way and how many of theirs are unread, kept by the
-- write that sends a message and the read that marks them read.
CREATE TABLE conversations (
    user_id         INTEGER NOT NULL REFERENCES users(id),
    other_id        INTEGER NOT NULL REFERENCES users(id),
    last_message_id INTEGER NOT NULL REFERENCES messages(id),
    unread          INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (user_id, other_id)
) WITHOUT ROWID;
CREATE INDEX conversations_recent ON conversations(user_id, last_message_id);

-- A recipient's report of a message they got: the only way a message's
-- text reaches an administrator. One report a message.
CREATE TABLE message_reports (
    id          INTEGER PRIMARY KEY,
    message_id  INTEGER NOT NULL UNIQUE REFERENCES messages(id),
    reporter_id INTEGER NOT NULL REFERENCES users(id),
    reason      TEXT    NOT NULL,
    status      TEXT    NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'resolved', 'dismissed')),
    created_at  INTEGER NOT NULL,
    resolved_by INTEGER REFERENCES users(id),
    resolved_at INTEGER
);

-- Users a user blocked: their posts show collapsed for the blocker, their
-- messages are refused, their replies and mentions notify no one of it.
CREATE TABLE user_blocks (
    user_id    INTEGER NOT NULL REFERENCES users(id),
    blocked_id INTEGER NOT NULL REFERENCES users(id),
    created_at INTEGER NOT NULL,
    PRIMARY KEY (user_id, blocked_id)
) WITHOUT ROWID;
