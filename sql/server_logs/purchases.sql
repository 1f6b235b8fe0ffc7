-- One row per purchased item with its amount, for `purchases`.
CREATE OR REPLACE TEMP VIEW purchases AS
SELECT
  customer_id,
  event_time,
  product_id,
  price AS unit_price,
  quantity,
  price * quantity AS amount
FROM events
WHERE event_type = 'purchase'
