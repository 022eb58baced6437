-- Account deletion and two-factor login (issue #21).

-- A deleted account keeps its row, so that what points at it (communities
-- it founded, the moderation log, bans it issued) stays whole and its name
-- and look-alike keys stay reserved: no one can register the name of a
-- person who left and speak as them. Every read of a name skips a row
-- with `deleted_at` set (content shows "[deleted]" under no name, the
-- profile is gone, login fails); its password hash and 2FA secret are
-- wiped when it is deleted.
ALTER TABLE users ADD COLUMN deleted_at INTEGER;

-- TOTP (RFC 6238): `totp_secret` is the shared secret of an enrolled
-- account (NULL: two-factor login is off); `totp_pending` the secret of an
-- enrolment started and not yet confirmed with a code; `totp_last_step`
-- the last 30-second step a code was accepted for, so no code works twice.
ALTER TABLE users ADD COLUMN totp_secret BLOB;
ALTER TABLE users ADD COLUMN totp_pending BLOB;
ALTER TABLE users ADD COLUMN totp_last_step INTEGER NOT NULL DEFAULT 0;

-- One-use recovery codes of an enrolled account, as SHA-256 digests; a
-- code is deleted when used.
CREATE TABLE recovery_codes (
    user_id INTEGER NOT NULL REFERENCES users(id),
    hash    BLOB    NOT NULL,
    PRIMARY KEY (user_id, hash)
) WITHOUT ROWID;
