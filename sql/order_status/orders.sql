-- Every order line parsed, with its arrival time (the source's timestamp: when the socket
-- line was read, the Kafka message time, or the file's modification time) and the reason it
-- cannot be used (reject_reason is NULL for a usable order).
CREATE OR REPLACE TEMP VIEW orders AS
WITH lines AS (
  SELECT value AS raw, origin, timestamp AS arrival_time, try_parse_json(value) AS doc
  FROM raw_orders
)
SELECT
  raw,
  origin,
  arrival_time,
  try_variant_get(doc, '$.order_id', 'string') AS order_id,
  try_variant_get(doc, '$.status', 'string') AS status,
  CASE
    WHEN doc IS NULL THEN 'malformed JSON'
    WHEN try_variant_get(doc, '$.order_id', 'string') IS NULL THEN 'missing order_id'
    WHEN try_variant_get(doc, '$.status', 'string') IS NULL THEN 'missing status'
    WHEN try_variant_get(doc, '$.status', 'string')
      NOT IN ('PLACED', 'INPROGRESS', 'COMPLETED', 'CANCELLED')
      THEN concat('unknown status: ', try_variant_get(doc, '$.status', 'string'))
  END AS reject_reason
FROM lines
