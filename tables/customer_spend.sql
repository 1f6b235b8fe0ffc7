-- Spend per customer since the first purchase (pipeline customer_spend, from purchases).
CREATE TABLE customer_spend (
  customer_id STRING NOT NULL COMMENT 'Customer id',
  purchased_items BIGINT NOT NULL COMMENT 'Purchase rows (one per product bought)',
  units BIGINT NOT NULL COMMENT 'Units bought (sum of quantity)',
  total_spent DOUBLE NOT NULL COMMENT 'Sum of amount, rounded to cents',
  first_purchase TIMESTAMP NOT NULL COMMENT 'Time of the first Purchase event',
  last_purchase TIMESTAMP NOT NULL COMMENT 'Time of the last Purchase event'
) USING DELTA
TBLPROPERTIES ('lake.mode' = 'merge', 'lake.key' = 'customer_id')
