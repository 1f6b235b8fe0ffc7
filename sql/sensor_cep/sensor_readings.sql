-- Every input record parsed into a sensor reading, with the reason it cannot be used
-- (reject_reason is NULL for a usable one). is_anomalous is THE anomaly rule of the pipeline.
CREATE OR REPLACE TEMP VIEW sensor_readings AS
WITH records AS (
  SELECT value AS raw, origin, try_parse_json(value) AS doc
  FROM raw_readings
),
fields AS (
  SELECT
    raw,
    origin,
    doc,
    try_variant_get(doc, '$.device_id', 'string') AS device_id,
    try_variant_get(doc, '$.sensor_freq', 'double') AS sensor_freq,
    try_variant_get(doc, '$.event_time', 'string') AS event_time_text
  FROM records
)
SELECT
  raw,
  origin,
  device_id,
  sensor_freq,
  try_to_timestamp(event_time_text) AS event_time,
  sensor_freq < 0 AS is_anomalous,
  CASE
    WHEN doc IS NULL THEN 'malformed JSON'
    WHEN device_id IS NULL OR trim(device_id) = '' THEN 'missing device_id'
    WHEN sensor_freq IS NULL THEN 'missing or non-numeric sensor_freq'
    WHEN event_time_text IS NULL THEN 'missing event_time'
    WHEN try_to_timestamp(event_time_text) IS NULL
      THEN concat('unparseable event_time: ', event_time_text)
  END AS reject_reason
FROM fields
