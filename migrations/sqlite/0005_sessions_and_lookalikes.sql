-- Sessions that end, and look-alike names (issue #26).

-- A token is a web session (the cookie) or an API token, each kind with
-- its own idle limit; `last_used_at` is written at most once a minute per
-- token (app/accounts.rs), and `label` says what it was issued to (the
-- browser's User-Agent, or the command that made it) for the owner's list
-- of sessions. Tokens issued before this migration cannot be told apart:
-- they count as API tokens, and as used now, so none ends at the upgrade.
ALTER TABLE tokens ADD COLUMN kind TEXT NOT NULL DEFAULT 'api' CHECK (kind IN ('session', 'api'));
ALTER TABLE tokens ADD COLUMN last_used_at INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tokens ADD COLUMN label TEXT NOT NULL DEFAULT '';
UPDATE tokens SET last_used_at = max(created_at, unixepoch());

-- Each name's look-alike keys (model/lookalike.rs): its Unicode TR39
-- confusable skeleton, lowercased, as written and of the name lowercased.
-- A new name whose keys meet a user's is refused. SQL cannot compute them:
-- NULL means "not computed yet", and the store fills them in when it opens
-- the database (src/store/sqlite/backfill.rs). Not unique: names already
-- on record that look alike stay; only new ones are refused.
ALTER TABLE users ADD COLUMN skeleton TEXT;
ALTER TABLE users ADD COLUMN skeleton_folded TEXT;
CREATE INDEX users_skeleton ON users(skeleton);
CREATE INDEX users_skeleton_folded ON users(skeleton_folded);
