-- Phase 2 of federation (issue #23, docs/FEDERATION.md): local users join
-- communities on other servers.
-- A remote community is a community of its own here, named `name@host`
-- (a local community's name never holds '@'), linked to its `Group`
-- actor; its creator is the user its Group acts as. Its topics and posts
-- arrive in the Group's `Announce`s and are stored as local ones are,
-- their remote ids in `ap_objects`.
ALTER TABLE communities ADD COLUMN actor INTEGER REFERENCES ap_actors(id);
CREATE UNIQUE INDEX communities_actor ON communities(actor) WHERE actor IS NOT NULL;

-- A local user's `Follow` of a remote community: pending until its Group
-- `Accept`s it (`accepted` 1). The follow's id is what the Accept and a
-- later `Undo` name.
CREATE TABLE ap_following (
    community_id INTEGER NOT NULL REFERENCES communities(id),
    user_id      INTEGER NOT NULL REFERENCES users(id),
    follow_id    TEXT    NOT NULL UNIQUE,
    accepted     INTEGER NOT NULL DEFAULT 0,
    created_at   INTEGER NOT NULL,
    PRIMARY KEY (community_id, user_id)
);
