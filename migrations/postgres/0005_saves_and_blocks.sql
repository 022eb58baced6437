-- Saved topics and posts, and blocked communities (issue #21).

-- What a user saved: a topic (kind 0) or a post (kind 1), as `votes`
-- names its targets. Saving twice keeps the first time; the saved list
-- reads newest first through `saves_by_time`.
CREATE TABLE saves (
    user_id   BIGINT NOT NULL REFERENCES users(id),
    kind      BIGINT NOT NULL CHECK (kind IN (0, 1)),
    target_id BIGINT NOT NULL,
    saved_at  BIGINT NOT NULL,
    PRIMARY KEY (user_id, kind, target_id)
);
CREATE INDEX saves_by_time ON saves(user_id, saved_at DESC, kind DESC, target_id DESC);

-- Communities a user hides from their front page.
CREATE TABLE community_blocks (
    user_id      BIGINT NOT NULL REFERENCES users(id),
    community_id BIGINT NOT NULL REFERENCES communities(id),
    created_at   BIGINT NOT NULL,
    PRIMARY KEY (user_id, community_id)
);
