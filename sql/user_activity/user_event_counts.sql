-- Events per user in a batch, duplicates excluded: the table user_event_counts adds them to
-- the user's total (its lake.mode is 'add'), so this runs on each batch and keeps no state.
CREATE OR REPLACE TEMP VIEW user_event_counts AS
SELECT user, count(*) AS events
FROM activity_events
GROUP BY user
