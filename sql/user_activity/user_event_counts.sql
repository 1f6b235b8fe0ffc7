-- Events per user, duplicates excluded; the query runs in update mode and merges by user.
CREATE OR REPLACE TEMP VIEW user_event_counts AS
SELECT user, count(*) AS events
FROM activity_events
GROUP BY user
