-- Email (issue #21). One row per account that gave an address: `address`
-- is the verified one, `pending` one waiting for its link to be followed
-- (a new account's, or a change). `digest` opts into notification mail;
-- `digest_sent_at` and `digest_after` (the newest notification mailed)
-- keep it to one mail per 15 minutes with nothing mailed twice.
CREATE TABLE emails (
    user_id        INTEGER PRIMARY KEY REFERENCES users(id) ON DELETE CASCADE,
    address        TEXT    UNIQUE COLLATE NOCASE,
    pending        TEXT    COLLATE NOCASE,
    digest         INTEGER NOT NULL DEFAULT 0,
    digest_sent_at INTEGER NOT NULL DEFAULT 0,
    digest_after   INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX emails_pending ON emails(pending) WHERE pending IS NOT NULL;
CREATE INDEX emails_digest ON emails(user_id) WHERE digest = 1;

-- One-use links mailed (or printed by `pith user reset-link`), stored as
-- the SHA-256 of their token, as session tokens are. Deleted when used.
-- `address`: the address a verification link proves ('' for a reset).
CREATE TABLE mail_tokens (
    hash       BLOB    PRIMARY KEY,
    user_id    INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    purpose    TEXT    NOT NULL CHECK (purpose IN ('verify', 'reset')),
    address    TEXT    NOT NULL DEFAULT '',
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX mail_tokens_user ON mail_tokens(user_id);

-- Mail waiting to be sent, queued in the transaction of the write that
-- causes it; the sender deletes a row once the SMTP server took it.
-- `next_at`: when it may be tried (or, while a sender holds it, when its
-- claim lapses). `failed`: given up after too many attempts (body erased).
CREATE TABLE outbox (
    id         INTEGER PRIMARY KEY,
    to_addr    TEXT    NOT NULL,
    subject    TEXT    NOT NULL,
    body       TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    attempts   INTEGER NOT NULL DEFAULT 0,
    next_at    INTEGER NOT NULL,
    failed     INTEGER NOT NULL DEFAULT 0,
    last_error TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX outbox_due ON outbox(next_at) WHERE failed = 0;
