-- One row per event item (a Purchase of three products gives three rows), for `events`;
-- item_index numbers the items of a line from 0, so a line is counted once by its item 0.
CREATE OR REPLACE TEMP VIEW events AS
SELECT
  customer_id,
  event_time,
  event_type,
  item_index,
  item.product_id,
  item.price,
  item.quantity,
  source,
  logged_out,
  to_date(event_time) AS event_date
FROM log_lines
LATERAL VIEW posexplode(items) exploded AS item_index, item
