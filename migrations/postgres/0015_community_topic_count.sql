-- A community's count of its topics in view (neither deleted nor removed),
-- kept by triggers on every write to topics, whichever code made it. It
-- was counted on every read of a community, which every inbound activity
-- makes: O(topics) per activity in a community with many.
ALTER TABLE communities ADD COLUMN topic_count BIGINT NOT NULL DEFAULT 0;
UPDATE communities c SET topic_count =
    (SELECT count(*) FROM topics t WHERE t.community_id = c.id AND NOT t.deleted AND NOT t.removed);

-- Inserts are counted once per statement, a community's new topics
-- together: a seed's COPY of a million topics updates each community
-- once, not once per topic (each update of a row is a new version of it).
CREATE FUNCTION topics_count_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE communities c SET topic_count = c.topic_count + n.n
    FROM (SELECT community_id, count(*) AS n FROM new_topics WHERE NOT deleted AND NOT removed
          GROUP BY community_id) n
    WHERE c.id = n.community_id;
    RETURN NULL;
END
$$;
CREATE TRIGGER topics_count_insert AFTER INSERT ON topics
    REFERENCING NEW TABLE AS new_topics FOR EACH STATEMENT EXECUTE FUNCTION topics_count_inserted();

-- Changes, row by row, and only of the columns the count depends on: a
-- vote's update of a topic's score does not fire it.
CREATE FUNCTION topics_count_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT OLD.deleted AND NOT OLD.removed THEN
        UPDATE communities SET topic_count = topic_count - 1 WHERE id = OLD.community_id;
    END IF;
    IF TG_OP = 'UPDATE' THEN
        IF NOT NEW.deleted AND NOT NEW.removed THEN
            UPDATE communities SET topic_count = topic_count + 1 WHERE id = NEW.community_id;
        END IF;
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER topics_count_change AFTER DELETE OR UPDATE OF community_id, deleted, removed ON topics
    FOR EACH ROW EXECUTE FUNCTION topics_count_changed();
