-- Running totals of orders per status.
CREATE TABLE order_totals (
  status STRING NOT NULL COMMENT 'PLACED, INPROGRESS, COMPLETED or CANCELLED',
  orders BIGINT NOT NULL COMMENT 'Orders with this status since the pipeline started',
  updated_at TIMESTAMP NOT NULL COMMENT 'Arrival time of the newest order counted'
) USING DELTA
TBLPROPERTIES ('lake.mode' = 'merge', 'lake.key' = 'status')
