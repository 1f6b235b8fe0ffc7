-- One row per customer session; open sessions are updated until they end.
CREATE TABLE sessions (
  customer_id STRING NOT NULL COMMENT 'Customer id',
  session_start TIMESTAMP NOT NULL COMMENT 'Time of the first event of the session',
  last_event_time TIMESTAMP NOT NULL COMMENT 'Time of the latest event of the session',
  total_events BIGINT NOT NULL COMMENT 'Log lines in the session (a Purchase line counts once)',
  logged_in BOOLEAN NOT NULL COMMENT 'True while the session is open',
  end_reason STRING COMMENT 'logout | timeout; NULL while open',
  session_end TIMESTAMP COMMENT 'Logout time, or last_event_time + timeout; NULL while open'
) USING DELTA
TBLPROPERTIES ('lake.mode' = 'merge', 'lake.key' = 'customer_id, session_start')
