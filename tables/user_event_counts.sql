-- Events per user, duplicates (same User and Creation_Time) not counted. Each batch's counts
-- are added to the user's row (lake.mode 'add').
CREATE TABLE user_event_counts (
  user STRING NOT NULL COMMENT 'User id (a..i in the activity data)',
  events BIGINT NOT NULL COMMENT 'Distinct events of the user so far'
) USING DELTA
TBLPROPERTIES ('lake.mode' = 'add', 'lake.key' = 'user')
