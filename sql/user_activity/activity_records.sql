-- Every input record of the activity-data layout parsed and typed, with the reason it cannot
-- be used (reject_reason is NULL for a usable one). event_time is Creation_Time (ns) exactly.
CREATE OR REPLACE TEMP VIEW activity_records AS
WITH records AS (
  SELECT value AS raw, origin, try_parse_json(value) AS doc
  FROM raw_activity
),
fields AS (
  SELECT
    raw,
    origin,
    doc,
    try_variant_get(doc, '$.User', 'string') AS user,
    try_variant_get(doc, '$.Creation_Time', 'bigint') AS creation_ns,
    try_variant_get(doc, '$.Arrival_Time', 'bigint') AS arrival_ms,
    try_variant_get(doc, '$.gt', 'string') AS activity,
    try_variant_get(doc, '$.Device', 'string') AS device,
    try_variant_get(doc, '$.Model', 'string') AS model,
    try_variant_get(doc, '$.Index', 'bigint') AS reading_index,
    try_variant_get(doc, '$.x', 'double') AS x,
    try_variant_get(doc, '$.y', 'double') AS y,
    try_variant_get(doc, '$.z', 'double') AS z
  FROM records
)
SELECT
  raw,
  origin,
  user,
  timestamp_micros(creation_ns DIV 1000) AS event_time,
  timestamp_millis(arrival_ms) AS arrival_time,
  activity,
  device,
  model,
  reading_index,
  x,
  y,
  z,
  CASE
    WHEN doc IS NULL THEN 'malformed JSON'
    WHEN user IS NULL OR trim(user) = '' THEN 'missing User'
    WHEN creation_ns IS NULL THEN 'missing or non-numeric Creation_Time'
    WHEN activity IS NULL OR trim(activity) = '' THEN 'missing gt (activity)'
  END AS reject_reason
FROM fields
