-- A topic's count of posts, out of its row, as in SQLite's 0019: an UPDATE
-- of the wide topics row per post wrote a new version of the whole row
-- (title, Markdown and HTML of the topic's body). A topic with no row has
-- no posts; the store adds the row with its first post.
CREATE TABLE topic_counts (
    topic_id   BIGINT PRIMARY KEY REFERENCES topics(id) ON DELETE CASCADE,
    post_count BIGINT NOT NULL
);
INSERT INTO topic_counts (topic_id, post_count) SELECT id, post_count FROM topics WHERE post_count <> 0;
ALTER TABLE topics DROP COLUMN post_count;
