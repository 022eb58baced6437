-- Account deletion and two-factor login (issue #21): the columns and table
-- of migrations/sqlite/0010_two_factor_and_deletion.sql, which explains them.
ALTER TABLE users ADD COLUMN deleted_at BIGINT;
ALTER TABLE users ADD COLUMN totp_secret BYTEA;
ALTER TABLE users ADD COLUMN totp_pending BYTEA;
ALTER TABLE users ADD COLUMN totp_last_step BIGINT NOT NULL DEFAULT 0;

CREATE TABLE recovery_codes (
    user_id BIGINT NOT NULL REFERENCES users(id),
    hash    BYTEA  NOT NULL,
    PRIMARY KEY (user_id, hash)
);
