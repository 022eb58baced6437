-- Federation's inbound content (issue #23, docs/FEDERATION.md).
-- A remote actor that posts is a user of its own, named `name@host`
-- (local names never contain '@'), with no password and no token: it
-- cannot log in. `users.actor` links it to its `ap_actors` row.
ALTER TABLE users ADD COLUMN actor INTEGER REFERENCES ap_actors(id);
CREATE UNIQUE INDEX users_actor ON users(actor) WHERE actor IS NOT NULL;

-- The actor document's `url` (its profile page at home), when it gave one
-- on its own host; the profile links there, else to its id.
ALTER TABLE ap_actors ADD COLUMN url TEXT;

-- Remote objects (a `Page`'s or `Note`'s `id`) and the local topic
-- (kind 0) or post (kind 1) each became, written in the transaction that
-- creates the topic or post: a repeated `Create` finds its id taken, and
-- `Update`, `Delete`, `inReplyTo` and `Like` find what they name.
CREATE TABLE ap_objects (
    object_id TEXT    NOT NULL PRIMARY KEY,
    kind      INTEGER NOT NULL,
    local_id  INTEGER NOT NULL,
    topic_id  INTEGER NOT NULL,           -- the topic itself, or the post's
    UNIQUE (kind, local_id)
);
