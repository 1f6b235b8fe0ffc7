-- Every input record parsed into a sensor reading, with the reason it cannot be used
-- (reject_reason is NULL for a usable one). is_anomalous is THE anomaly rule of the pipeline.
--
-- The values are those of the record read as VARIANT (try_parse_json, try_variant_get). A
-- regular record is read with from_json instead, much faster and with the very same values;
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
-- A record is regular when from_json gives for it what VARIANT gives:
-- * a JSON object that from_json read without error, and no \u escape (VARIANT rejects a lone
--   surrogate such as \ud800, from_json not);
-- * device_id a JSON string or integer, event_time a JSON string: for other values in a STRING
--   field from_json and VARIANT may write different text (1E2 is 100.0 as from_json reads it,
--   1.0E2 as VARIANT; an integer of 19 digits or more may not be a BIGINT for VARIANT);
-- * sensor_freq not -0.0: from_json reads it as the double -0.0, VARIANT as the decimal 0;
-- * the three fields there and not null, and no other key: a record has one colon a key besides
--   those of event_time, and a colon in device_id makes it irregular. So no duplicate key, which
--   VARIANT rejects and from_json reads as its last value.
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
      AND octet_length(raw) - octet_length(replace(raw, ':', ''))
        = 3 + octet_length(j.event_time) - octet_length(replace(j.event_time, ':', '')),
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
