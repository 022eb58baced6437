-- A topic's count of posts, out of its row (issue #24; docs/PERFORMANCE.md,
-- "Change: the post counts out of the topics' rows"). Every post added one
-- to `topics.post_count`, which dirtied the topic's row: a page holding a
-- few wide rows (title, Markdown and HTML of the topic's body), at a random
-- place, one more 4 KB WAL frame per post. The counts of a realistic site's
-- topics fit in a handful of pages here, which the posts of one group
-- commit share. A topic with no row has no posts; the store adds the row
-- with its first post. Both backends (PostgreSQL: 0016).
CREATE TABLE topic_counts (
    topic_id   INTEGER PRIMARY KEY REFERENCES topics(id) ON DELETE CASCADE,
    post_count INTEGER NOT NULL
);
INSERT INTO topic_counts (topic_id, post_count) SELECT id, post_count FROM topics WHERE post_count != 0;
ALTER TABLE topics DROP COLUMN post_count;
