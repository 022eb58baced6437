-- Sessions that end, and look-alike names (issue #26): the columns of
-- migrations/sqlite/0005_sessions_and_lookalikes.sql, which explains them.

ALTER TABLE tokens ADD COLUMN kind TEXT NOT NULL DEFAULT 'api' CHECK (kind IN ('session', 'api'));
ALTER TABLE tokens ADD COLUMN last_used_at BIGINT NOT NULL DEFAULT 0;
ALTER TABLE tokens ADD COLUMN label TEXT NOT NULL DEFAULT '';
UPDATE tokens SET last_used_at = greatest(created_at, extract(epoch FROM now())::bigint);

-- NULL until computed: the store fills them in, in Rust, when it connects
-- (src/store/postgres/conn.rs), and `pith seed` writes them.
ALTER TABLE users ADD COLUMN skeleton TEXT;
ALTER TABLE users ADD COLUMN skeleton_folded TEXT;
CREATE INDEX users_skeleton ON users(skeleton);
CREATE INDEX users_skeleton_folded ON users(skeleton_folded);
