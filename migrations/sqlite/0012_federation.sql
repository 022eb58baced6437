-- Federation (issue #23, docs/FEDERATION.md).
-- ap_keys: one RSA key pair per local actor (a community's Group, a user's
-- Person), made the first time the actor is published or signs; `kind` is
-- 0 for a community, 1 for a user (model::federation::ActorKind), and
-- `local_id` that community's or user's id. Private half PKCS#8 PEM,
-- public half SPKI PEM.
CREATE TABLE ap_keys (
    kind        INTEGER NOT NULL,
    local_id    INTEGER NOT NULL,
    private_pem TEXT    NOT NULL,
    public_pem  TEXT    NOT NULL,
    created_at  INTEGER NOT NULL,
    PRIMARY KEY (kind, local_id)
);

-- Remote actors as last fetched: where to deliver to them, and the key
-- their signatures are checked with (found by `key_id`, the Signature
-- header's keyId). Fetched again when a signature fails to verify.
CREATE TABLE ap_actors (
    id             INTEGER PRIMARY KEY,
    actor_id       TEXT    NOT NULL UNIQUE,
    inbox          TEXT    NOT NULL,
    shared_inbox   TEXT,
    key_id         TEXT    NOT NULL,
    public_key_pem TEXT    NOT NULL,
    name           TEXT    NOT NULL,
    fetched_at     INTEGER NOT NULL
);
CREATE INDEX ap_actors_key ON ap_actors (key_id);

-- Remote followers of local communities, each with the id of the Follow
-- that made them one (an Undo names it).
CREATE TABLE ap_followers (
    community_id INTEGER NOT NULL REFERENCES communities(id) ON DELETE CASCADE,
    actor        INTEGER NOT NULL REFERENCES ap_actors(id) ON DELETE CASCADE,
    follow_id    TEXT    NOT NULL,
    created_at   INTEGER NOT NULL,
    PRIMARY KEY (community_id, actor)
);
CREATE INDEX ap_followers_actor ON ap_followers (actor);

-- The delivery queue: each row one activity for one inbox (a server's
-- shared inbox stands for all its followers), signed at delivery by the
-- local actor (`signer_kind`, `signer_id`, `key_id`) that sends it.
-- `next_at`: when it is due, moved ahead while a sender holds it (a
-- lease) and by each failure's backoff; a row is deleted once delivered,
-- or given up two days after `created_at`. Senders read it a bounded
-- batch at a time, whatever its size (app::federation::queue).
CREATE TABLE ap_deliveries (
    id          INTEGER PRIMARY KEY,
    inbox       TEXT    NOT NULL,
    body        TEXT    NOT NULL,
    signer_kind INTEGER NOT NULL,
    signer_id   INTEGER NOT NULL,
    key_id      TEXT    NOT NULL,
    attempts    INTEGER NOT NULL DEFAULT 0,
    next_at     INTEGER NOT NULL,
    created_at  INTEGER NOT NULL,
    last_error  TEXT
);
CREATE INDEX ap_deliveries_due ON ap_deliveries (next_at, id);
