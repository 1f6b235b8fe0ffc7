-- Every order line parsed, with its arrival time (the source's timestamp: when the socket
-- line was read, the Kafka message time, or the file's modification time) and the reason it
-- cannot be used (reject_reason is NULL for a usable order).
CREATE OR REPLACE TEMP VIEW orders AS
WITH texts AS (
  -- Files and Kafka's value cast to STRING keep a line's bytes as they are (the socket source
  -- decodes a line itself, with replacement characters). A line that is not valid UTF-8 is not
  -- parsed and its raw text is the base64 of its bytes, so the quarantine keeps it losslessly.
  SELECT value, origin, timestamp, coalesce(is_valid_utf8(value), true) AS utf8
  FROM raw_orders
),
lines AS (
  SELECT
    utf8,
    -- base64 breaks its text into lines of 76 characters (spark.sql.chunkBase64String.enabled):
    -- without the breaks raw is one plain base64 string, whatever that setting.
    if(utf8, value, regexp_replace(base64(CAST(value AS BINARY)), '\\s', '')) AS raw,
    origin,
    timestamp AS arrival_time,
    CASE WHEN utf8 THEN try_parse_json(value) END AS doc,
    -- VARIANT's parser reads only a line's first JSON value. Inside brackets, any text after it
    -- makes the array invalid ({...} xyz, {...}{...}) or a second element ({...}, {...}).
    CASE WHEN utf8 THEN try_parse_json(concat('[', value, ']')) END AS wrapped
  FROM texts
),
fields AS (
  SELECT
    *,
    try_variant_get(doc, '$.order_id', 'string') AS order_id,
    try_variant_get(doc, '$.status', 'string') AS status,
    -- The JSON type of order_id, which VARIANT would read as its JSON text were it a number or
    -- an object (a status that is not a string is never a known one). schema_of_variant names
    -- it: an integer (BIGINT, or DECIMAL(n,0) past 18 digits) is called INTEGER here; 1.5 is
    -- DECIMAL, 1e5 DOUBLE; then BOOLEAN, STRING, OBJECT, ARRAY; NULL when absent.
    CASE
      WHEN schema_of_variant(try_variant_get(doc, '$.order_id', 'variant'))
        RLIKE '^(BIGINT|DECIMAL\\([0-9]+,0\\))$'
        THEN 'INTEGER'
      ELSE regexp_extract(
        schema_of_variant(try_variant_get(doc, '$.order_id', 'variant')), '^[A-Z]+', 0
      )
    END AS order_id_type
  FROM lines
),
-- The reasons checked since the start come first, so a line keeps the reason it always had;
-- later checks only catch lines that used to pass.
judged AS (
  SELECT
    *,
    CASE
      WHEN NOT utf8 THEN 'invalid UTF-8 (raw is base64)'
      WHEN doc IS NULL THEN 'malformed JSON'
      WHEN order_id IS NULL THEN 'missing order_id'
      WHEN status IS NULL THEN 'missing status'
      WHEN status NOT IN ('PLACED', 'INPROGRESS', 'COMPLETED', 'CANCELLED')
        THEN concat('unknown status: ', status)
      WHEN order_id_type != 'STRING'
        THEN concat('wrong type: order_id is ', order_id_type, ', expected STRING')
      -- The sane range of arrival times (a Kafka producer may set any message time): from
      -- 2000-01-01 to one day after the batch's time (in a micro-batch current_timestamp() is
      -- the batch's timestamp, so a replay decides the same). These two literals are the
      -- setting. A time far ahead would move the watermark of order_counts past every window.
      WHEN arrival_time < TIMESTAMP '2000-01-01 00:00:00'
        OR arrival_time > current_timestamp() + INTERVAL 1 DAY
        THEN concat('arrival_time out of range: ', arrival_time)
      WHEN coalesce(array_size(try_variant_get(wrapped, '$', 'array<variant>')) != 1, true)
        THEN 'text after the JSON object'
    END AS reject_reason
  FROM fields
)
SELECT
  raw,
  origin,
  -- Only a usable order's time may reach the watermark of order_counts.
  if(reject_reason IS NULL, arrival_time, NULL) AS arrival_time,
  order_id,
  status,
  reject_reason
FROM judged
