-- Runs of a user's events with one activity. A run is open until a later event with another
-- activity closes it; span_no numbers a user's runs from 1 and is the merge key with user.
CREATE TABLE activity_spans (
  user STRING NOT NULL COMMENT 'User id',
  span_no INT NOT NULL COMMENT 'Number of the run among the runs of the user, from 1',
  activity STRING NOT NULL COMMENT 'The activity (gt) of every event in the run',
  span_start TIMESTAMP NOT NULL COMMENT 'Event time of the first event of the run',
  span_end TIMESTAMP NOT NULL COMMENT 'Event time of the last event of the run',
  events BIGINT NOT NULL COMMENT 'Events in the run, duplicates excluded',
  closed BOOLEAN NOT NULL COMMENT 'A later event with another activity ended the run'
) USING DELTA
TBLPROPERTIES ('lake.mode' = 'merge', 'lake.key' = 'user, span_no')
