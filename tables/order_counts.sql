-- Orders per status per 5 s window of arrival time.
CREATE TABLE order_counts (
  window_start TIMESTAMP NOT NULL COMMENT 'Start of the 5 s arrival window',
  window_end TIMESTAMP NOT NULL COMMENT 'End of the window (exclusive)',
  status STRING NOT NULL COMMENT 'PLACED, INPROGRESS, COMPLETED or CANCELLED',
  orders BIGINT NOT NULL COMMENT 'Orders with this status that arrived in the window'
) USING DELTA
TBLPROPERTIES ('lake.mode' = 'merge', 'lake.key' = 'window_start, status')
