-- Every input record parsed into a sensor reading, with the reason it cannot be used
-- (reject_reason is NULL for a usable one). is_anomalous is THE anomaly rule of the pipeline.
--
-- The values are those of the record read as VARIANT (try_parse_json, try_variant_get). A
-- regular record is read with from_json instead, which is cheaper and gives the very same values;
-- any other record is still read as VARIANT (see `checked` below).
CREATE OR REPLACE TEMP VIEW sensor_readings AS
WITH records AS (
  SELECT
    value AS raw,
    origin,
    from_json(
      value,
      'device_id STRING, sensor_freq DOUBLE, event_time STRING, _corrupt_record STRING',
      -- As strict as VARIANT's parser. A record that is not a JSON object, or has a
      -- sensor_freq that is not a JSON number, gets _corrupt_record.
      map(
        'mode', 'PERMISSIVE', 'columnNameOfCorruptRecord', '_corrupt_record',
        'allowSingleQuotes', 'false', 'allowNonNumericNumbers', 'false'
      )
    ) AS j
  FROM raw_readings
),
-- A record is regular when from_json reads it exactly as VARIANT does:
-- * from_json read a JSON object without error, so sensor_freq is a JSON number; and there is
--   no \u escape (VARIANT rejects a lone surrogate such as \ud800, from_json does not);
-- * device_id a JSON string or an integer of at most 18 digits, event_time a JSON string. Any
--   other number, object or array read into a STRING field may be written differently by the
--   two (0.0000001 is 1.0E-7 for from_json; VARIANT sorts the keys of an object), and it always
--   matches one of the patterns below;
-- * sensor_freq not -0.0: it is the double -0.0 for from_json, the decimal 0 for VARIANT;
-- * the three fields there, none NULL, and no other key: a key has one colon, so splitting the
--   record at ':' gives one piece per key, plus one, plus event_time's own colons (a colon in
--   device_id makes the record irregular). So no duplicate key either, which VARIANT rejects
--   and from_json reads as its last value.
checked AS (
  SELECT
    raw,
    origin,
    j,
    coalesce(
      j._corrupt_record IS NULL
      AND NOT contains(raw, '\\u')
      AND NOT j.device_id RLIKE '^(-?[0-9]+[.eE]|-?[0-9]{19}|[\\[{"])'
      AND NOT j.event_time RLIKE '^(-?[0-9][0-9.eE+-]*$|[\\[{"])'
      AND NOT (j.sensor_freq = 0 AND CAST(j.sensor_freq AS STRING) = '-0.0')
      AND j.device_id IS NOT NULL AND j.sensor_freq IS NOT NULL AND j.event_time IS NOT NULL
      AND size(split(raw, ':')) = 3 + size(split(j.event_time, ':')),
      false
    ) AS regular
  FROM records
),
parsed AS (
  SELECT *, CASE WHEN NOT regular THEN try_parse_json(raw) END AS doc
  FROM checked
),
fields AS (
  SELECT
    raw,
    origin,
    NOT regular AND doc IS NULL AS malformed,
    if(regular, j.device_id, try_variant_get(doc, '$.device_id', 'string')) AS device_id,
    if(regular, j.sensor_freq, try_variant_get(doc, '$.sensor_freq', 'double')) AS sensor_freq,
    if(regular, j.event_time, try_variant_get(doc, '$.event_time', 'string')) AS event_time_text
  FROM parsed
)
SELECT
  raw,
  origin,
  device_id,
  sensor_freq,
  try_to_timestamp(event_time_text) AS event_time,
  sensor_freq < 0 AS is_anomalous,
  CASE
    WHEN malformed THEN 'malformed JSON'
    WHEN device_id IS NULL OR trim(device_id) = '' THEN 'missing device_id'
    WHEN sensor_freq IS NULL THEN 'missing or non-numeric sensor_freq'
    WHEN event_time_text IS NULL THEN 'missing event_time'
    WHEN try_to_timestamp(event_time_text) IS NULL
      THEN concat('unparseable event_time: ', event_time_text)
  END AS reject_reason
FROM fields
