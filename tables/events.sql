-- One row per event item: a Purchase line with three items gives three rows.
CREATE TABLE events (
  customer_id STRING NOT NULL COMMENT 'Customer id, e.g. 1028_CId',
  event_time TIMESTAMP NOT NULL COMMENT 'When the event happened (UTC)',
  event_type STRING NOT NULL COMMENT 'add_to_cart | product_view | purchase',
  product_id STRING COMMENT 'Product of this item',
  price DOUBLE COMMENT 'Unit price; Purchase prices have their $ removed',
  quantity INT COMMENT 'Items bought (Purchase), 1 otherwise',
  source STRING COMMENT 'Site the event came from, or LoggedOut',
  logged_out BOOLEAN NOT NULL COMMENT 'The customer logged out with this event',
  event_date DATE NOT NULL COMMENT 'Date of event_time, the partition column'
) USING DELTA
PARTITIONED BY (event_date)
TBLPROPERTIES ('lake.mode' = 'append')
