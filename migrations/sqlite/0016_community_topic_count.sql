-- A community's count of its topics in view (neither deleted nor removed),
-- kept by triggers on every write to topics, whichever code made it. It
-- was counted on every read of a community, which every inbound activity
-- makes: O(topics) per activity in a community with many.
ALTER TABLE communities ADD COLUMN topic_count INTEGER NOT NULL DEFAULT 0;
UPDATE communities SET topic_count =
    (SELECT count(*) FROM topics t WHERE t.community_id = communities.id AND t.deleted = 0 AND t.removed = 0);

CREATE TRIGGER topics_count_insert AFTER INSERT ON topics
WHEN NEW.deleted = 0 AND NEW.removed = 0 BEGIN
    UPDATE communities SET topic_count = topic_count + 1 WHERE id = NEW.community_id;
END;
CREATE TRIGGER topics_count_delete AFTER DELETE ON topics
WHEN OLD.deleted = 0 AND OLD.removed = 0 BEGIN
    UPDATE communities SET topic_count = topic_count - 1 WHERE id = OLD.community_id;
END;
CREATE TRIGGER topics_count_update AFTER UPDATE OF community_id, deleted, removed ON topics BEGIN
    UPDATE communities SET topic_count = topic_count - 1
        WHERE id = OLD.community_id AND OLD.deleted = 0 AND OLD.removed = 0;
    UPDATE communities SET topic_count = topic_count + 1
        WHERE id = NEW.community_id AND NEW.deleted = 0 AND NEW.removed = 0;
END;
