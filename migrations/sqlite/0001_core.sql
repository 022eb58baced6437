-- Pith core schema (SQLite). Times are Unix seconds (UTC).
-- Scores are denormalised onto topics and posts so that listings never
-- aggregate votes; `hot` is stored so "hot" listings walk an index.

CREATE TABLE users (
    id            INTEGER PRIMARY KEY,
    name          TEXT    NOT NULL UNIQUE COLLATE NOCASE,
    password_hash TEXT,                      -- NULL: cannot log in (seeded users)
    is_admin      INTEGER NOT NULL DEFAULT 0,
    created_at    INTEGER NOT NULL
);

CREATE TABLE tokens (
    hash       BLOB    PRIMARY KEY,          -- SHA-256 of the bearer token
    user_id    INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    created_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX tokens_user ON tokens(user_id);

CREATE TABLE communities (
    id          INTEGER PRIMARY KEY,
    name        TEXT    NOT NULL UNIQUE COLLATE NOCASE,
    title       TEXT    NOT NULL,
    description TEXT    NOT NULL DEFAULT '',
    created_by  INTEGER NOT NULL REFERENCES users(id),
    created_at  INTEGER NOT NULL
);

CREATE TABLE topics (
    id           INTEGER PRIMARY KEY,
    community_id INTEGER NOT NULL REFERENCES communities(id),
    author_id    INTEGER NOT NULL REFERENCES users(id),
    title        TEXT    NOT NULL,
    body         TEXT,
    url          TEXT,
    created_at   INTEGER NOT NULL,
    edited_at    INTEGER,
    deleted      INTEGER NOT NULL DEFAULT 0,  -- by its author
    removed      INTEGER NOT NULL DEFAULT 0,  -- by a moderator
    score        INTEGER NOT NULL DEFAULT 0,
    hot          REAL    NOT NULL,
    post_count   INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX topics_community_hot ON topics(community_id, hot DESC, id DESC);
CREATE INDEX topics_community_new ON topics(community_id, created_at DESC, id DESC);
CREATE INDEX topics_community_top ON topics(community_id, score DESC, id DESC);
CREATE INDEX topics_hot ON topics(hot DESC, id DESC);
CREATE INDEX topics_new ON topics(created_at DESC, id DESC);
CREATE INDEX topics_top ON topics(score DESC, id DESC);
CREATE INDEX topics_author ON topics(author_id, id DESC);

CREATE TABLE posts (
    id         INTEGER PRIMARY KEY,
    topic_id   INTEGER NOT NULL REFERENCES topics(id),
    parent_id  INTEGER REFERENCES posts(id),
    author_id  INTEGER NOT NULL REFERENCES users(id),
    body       TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    edited_at  INTEGER,
    deleted    INTEGER NOT NULL DEFAULT 0,    -- by its author
    removed    INTEGER NOT NULL DEFAULT 0,    -- by a moderator
    score      INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX posts_topic ON posts(topic_id, id);
CREATE INDEX posts_author ON posts(author_id, id DESC);

-- One vote per user per item; kind 0 = topic, 1 = post.
CREATE TABLE votes (
    user_id   INTEGER NOT NULL REFERENCES users(id),
    kind      INTEGER NOT NULL,
    target_id INTEGER NOT NULL,
    value     INTEGER NOT NULL CHECK (value IN (-1, 1)),
    PRIMARY KEY (user_id, kind, target_id)
) WITHOUT ROWID;
