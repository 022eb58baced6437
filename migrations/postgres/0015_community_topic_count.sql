-- A community's topic count (`Community::topic_count`), read with every
-- community, counts its topics that are neither deleted nor removed: this
-- index holds only those, so the count need not visit every topic's row
-- (the SQLite migration of the same name has the figures).
CREATE INDEX topics_community_live ON topics(community_id) WHERE NOT deleted AND NOT removed;
