-- Events per user, duplicates (same User and Creation_Time) not counted.
CREATE TABLE user_event_counts (
  user STRING NOT NULL COMMENT 'User id (a..i in the activity data)',
  events BIGINT NOT NULL COMMENT 'Distinct events of the user so far'
) USING DELTA
TBLPROPERTIES ('lake.mode' = 'merge', 'lake.key' = 'user')
