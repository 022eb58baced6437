-- Each user's count of unread notifications, stored (issue #24; docs/
-- PERFORMANCE.md, "Writes over HTTP"). It was counted through the partial
-- index `notifications_unread` after every notification, on the one writer
-- thread: a scan of up to 1,000 index entries per post, and one more leaf
-- at a random place dirtied (one more WAL frame) by every notification.
-- The store keeps the count in the transaction of every change to
-- `notifications` (store/sqlite/inbox.rs); the inbox's and the digests'
-- queries go by `notifications_user` (user_id, id). A user with no row has
-- no unread notification. SQLite only: PostgreSQL counts as before.
CREATE TABLE inbox_unread (
    user_id INTEGER PRIMARY KEY,
    unread  INTEGER NOT NULL
);
INSERT INTO inbox_unread (user_id, unread)
    SELECT user_id, count(*) FROM notifications WHERE read = 0 GROUP BY user_id;
DROP INDEX notifications_unread;
