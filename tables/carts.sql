-- The current cart of each customer; kept across logouts and session timeouts.
CREATE TABLE carts (
  customer_id STRING NOT NULL COMMENT 'Customer id',
  total_items BIGINT NOT NULL COMMENT 'Lines in the cart',
  total_price DOUBLE NOT NULL COMMENT 'Sum of the prices of the lines',
  products ARRAY<STRUCT<product_id: STRING, price: DOUBLE>> NOT NULL COMMENT 'Cart lines in the order they were added',
  updated_at TIMESTAMP NOT NULL COMMENT 'Event time of the latest change'
) USING DELTA
TBLPROPERTIES ('lake.mode' = 'merge', 'lake.key' = 'customer_id')
