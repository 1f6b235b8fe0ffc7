-- One row per event item (a Purchase of three products gives three rows), for `events`.
CREATE OR REPLACE TEMP VIEW events AS
SELECT
  customer_id,
  event_time,
  event_type,
  item.product_id,
  item.price,
  item.quantity,
  source,
  logged_out,
  to_date(event_time) AS event_date
FROM log_lines
LATERAL VIEW explode(items) exploded AS item
