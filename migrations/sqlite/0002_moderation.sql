-- Moderation and registration (issue #5). Times are Unix seconds (UTC).
-- Site administrators are `users.is_admin`; everything below is per
-- community or site-wide (a NULL community).

-- A locked topic takes no new replies (moderators excepted).
ALTER TABLE topics ADD COLUMN locked INTEGER NOT NULL DEFAULT 0;

CREATE TABLE moderators (
    community_id INTEGER NOT NULL REFERENCES communities(id),
    user_id      INTEGER NOT NULL REFERENCES users(id),
    created_at   INTEGER NOT NULL,
    PRIMARY KEY (community_id, user_id)
) WITHOUT ROWID;
CREATE INDEX moderators_user ON moderators(user_id);

-- Every existing community's creator becomes its first moderator, as new
-- communities' creators do.
INSERT INTO moderators (community_id, user_id, created_at)
    SELECT id, created_by, created_at FROM communities;

-- Current bans only: one per user and scope; lifting a ban deletes it (the
-- moderation log keeps the history). An expired ban is simply ignored.
CREATE TABLE bans (
    id           INTEGER PRIMARY KEY,
    user_id      INTEGER NOT NULL REFERENCES users(id),
    community_id INTEGER REFERENCES communities(id),   -- NULL: site-wide
    reason       TEXT    NOT NULL DEFAULT '',
    banned_by    INTEGER NOT NULL REFERENCES users(id),
    created_at   INTEGER NOT NULL,
    expires_at   INTEGER                               -- NULL: permanent
);
CREATE UNIQUE INDEX bans_scope ON bans(user_id, ifnull(community_id, 0));
CREATE INDEX bans_community ON bans(community_id, id DESC);

CREATE TABLE reports (
    id           INTEGER PRIMARY KEY,
    community_id INTEGER NOT NULL REFERENCES communities(id),
    topic_id     INTEGER NOT NULL REFERENCES topics(id),
    post_id      INTEGER REFERENCES posts(id),          -- NULL: the topic itself
    reporter_id  INTEGER NOT NULL REFERENCES users(id),
    reason       TEXT    NOT NULL,
    status       TEXT    NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'resolved', 'dismissed')),
    created_at   INTEGER NOT NULL,
    resolved_by  INTEGER REFERENCES users(id),
    resolved_at  INTEGER
);
CREATE INDEX reports_queue ON reports(community_id, status, id DESC);
-- One open report per user per item: reporting again cannot flood the queue.
CREATE UNIQUE INDEX reports_once ON reports(reporter_id, topic_id, ifnull(post_id, 0)) WHERE status = 'open';

-- The public moderation log.
CREATE TABLE mod_log (
    id             INTEGER PRIMARY KEY,
    community_id   INTEGER REFERENCES communities(id),  -- NULL: site-wide (site bans)
    actor_id       INTEGER NOT NULL REFERENCES users(id),
    action         TEXT    NOT NULL,
    target_user_id INTEGER REFERENCES users(id),
    topic_id       INTEGER,
    post_id        INTEGER,
    reason         TEXT    NOT NULL DEFAULT '',
    expires_at     INTEGER,                             -- for bans
    created_at     INTEGER NOT NULL
);
CREATE INDEX mod_log_community ON mod_log(community_id, id DESC);

-- Site settings: exactly one row.
CREATE TABLE site (
    id           INTEGER PRIMARY KEY CHECK (id = 1),
    registration TEXT    NOT NULL DEFAULT 'open' CHECK (registration IN ('open', 'closed', 'invite'))
);
INSERT INTO site (id) VALUES (1);

CREATE TABLE invites (
    id         INTEGER PRIMARY KEY,
    code_hash  BLOB    NOT NULL UNIQUE,                 -- SHA-256 of the code
    created_by INTEGER REFERENCES users(id),            -- NULL: made on the command line
    created_at INTEGER NOT NULL,
    expires_at INTEGER,                                 -- NULL: never
    used_by    INTEGER REFERENCES users(id),
    used_at    INTEGER
);
