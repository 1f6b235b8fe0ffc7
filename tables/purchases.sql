-- One row per purchased item.
CREATE TABLE purchases (
  customer_id STRING NOT NULL COMMENT 'Customer id',
  event_time TIMESTAMP NOT NULL COMMENT 'Time of the Purchase event',
  product_id STRING NOT NULL COMMENT 'Product bought',
  unit_price DOUBLE NOT NULL COMMENT 'Price of one unit ($ removed)',
  quantity INT NOT NULL COMMENT 'Units bought',
  amount DOUBLE NOT NULL COMMENT 'unit_price * quantity'
) USING DELTA
TBLPROPERTIES ('lake.mode' = 'append')
