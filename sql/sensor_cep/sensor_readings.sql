-- Every input record parsed into a sensor reading, with the reason it cannot be read
-- (reject_reason is NULL for a readable one). is_anomalous is THE anomaly rule of the pipeline.
-- The rules on the values of a readable record are expectations in valid_readings.sql.
--
-- The values are those of the record read as VARIANT (try_parse_json, try_variant_get). A
-- regular record is read with from_json instead, which is cheaper and gives the very same values;
-- any other record is still read as VARIANT (see `checked` below). Neither may coerce: a field
-- whose JSON type is not the format's is a reject reason (see `wrong_type`).
CREATE OR REPLACE TEMP VIEW sensor_readings AS
WITH texts AS (
  -- The text source, and Kafka's value cast to STRING, keep a record's bytes as they are. A
  -- record that is not valid UTF-8 is not parsed (a parser would read replacement characters)
  -- and its raw text is the base64 of its bytes, so the quarantine keeps it losslessly.
  SELECT value, origin, coalesce(is_valid_utf8(value), true) AS utf8
  FROM raw_readings
),
records AS (
  SELECT
    utf8,
    -- base64 breaks its text into lines of 76 characters (spark.sql.chunkBase64String.enabled):
    -- without the breaks raw is one plain base64 string, whatever that setting.
    if(utf8, value, regexp_replace(base64(CAST(value AS BINARY)), '\\s', '')) AS raw,
    origin,
    from_json(
      if(utf8, value, NULL),
      'device_id STRING, sensor_freq DOUBLE, event_time STRING, _corrupt_record STRING',
      -- As strict as VARIANT's parser. A record that is not a JSON object, or has a
      -- sensor_freq that is not a JSON number, gets _corrupt_record.
      map(
        'mode', 'PERMISSIVE', 'columnNameOfCorruptRecord', '_corrupt_record',
        'allowSingleQuotes', 'false', 'allowNonNumericNumbers', 'false'
      )
    ) AS j
  FROM texts
),
-- A record is regular when from_json reads it exactly as VARIANT does:
-- * from_json read a JSON object without error, so sensor_freq is a JSON number; and there is
--   no \u escape (VARIANT rejects a lone surrogate such as \ud800, from_json does not);
-- * its one closing brace is its last character: from_json reads the first JSON value of a
--   record and ignores any text after it. Such a record is read as VARIANT, where that text is
--   a reject reason (see `wrapped`); a brace in a text field also sends a record there;
-- * device_id a JSON string or an integer of at most 18 digits, event_time a JSON string. Any
--   other number, a boolean, an object or array read into a STRING field may be written
--   differently by the two (0.0000001 is 1.0E-7 for from_json; VARIANT sorts the keys of an
--   object) or is the wrong type, and it always matches one of the patterns below;
-- * sensor_freq not -0.0: it is the double -0.0 for from_json, the decimal 0 for VARIANT;
-- * the three fields there, none NULL, and no other key: a key has one colon, so splitting the
--   record at ':' gives one piece per key, plus one, plus event_time's own colons (a colon in
--   device_id makes the record irregular). So no duplicate key either, which VARIANT rejects
--   and from_json reads as its last value.
checked AS (
  SELECT
    utf8,
    raw,
    origin,
    j,
    coalesce(
      j._corrupt_record IS NULL
      AND instr(raw, '}') = length(raw)
      AND NOT contains(raw, '\\u')
      AND NOT j.device_id RLIKE '^(-?[0-9]+[.eE]|-?[0-9]{19}|true$|false$|[\\[{"])'
      AND NOT j.event_time RLIKE '^(-?[0-9][0-9.eE+-]*$|true$|false$|[\\[{"])'
      AND NOT (j.sensor_freq = 0 AND CAST(j.sensor_freq AS STRING) = '-0.0')
      AND j.device_id IS NOT NULL AND j.sensor_freq IS NOT NULL AND j.event_time IS NOT NULL
      AND size(split(raw, ':')) = 3 + size(split(j.event_time, ':')),
      false
    ) AS regular
  FROM records
),
-- VARIANT's parser also reads only a record's first JSON value. Inside brackets, any text after
-- it makes the array invalid ({...} xyz, {...}{...}) or a second element ({...}, {...}).
parsed AS (
  SELECT
    *,
    CASE WHEN utf8 AND NOT regular THEN try_parse_json(raw) END AS doc,
    CASE WHEN utf8 AND NOT regular THEN try_parse_json(concat('[', raw, ']')) END AS wrapped
  FROM checked
),
-- Each field of a record read as VARIANT, with the JSON type the format gives it: device_id a
-- STRING or an INTEGER (the seed's ids are numbers), sensor_freq a NUMBER (an integer, decimal
-- or double), event_time a STRING.
expected_types AS (
  SELECT
    *,
    CASE WHEN doc IS NOT NULL THEN array(
      named_struct(
        'field', 'device_id', 'value', try_variant_get(doc, '$.device_id', 'variant'),
        'expected', 'STRING or INTEGER'
      ),
      named_struct(
        'field', 'sensor_freq', 'value', try_variant_get(doc, '$.sensor_freq', 'variant'),
        'expected', 'NUMBER'
      ),
      named_struct(
        'field', 'event_time', 'value', try_variant_get(doc, '$.event_time', 'variant'),
        'expected', 'STRING'
      )
    ) END AS typed_fields
  FROM parsed
),
-- The first field whose JSON type is not the expected one, e.g. an object as device_id (which
-- VARIANT would read as its JSON text) or "44.5" as sensor_freq (read as 44.5). A JSON null or
-- absent field is left to the missing-field checks; a regular record has the right types by
-- construction. schema_of_variant names the type: an integer (BIGINT, or DECIMAL(n,0) past 18
-- digits) is called INTEGER here; 1.5 is DECIMAL, 1e5 DOUBLE; then BOOLEAN, STRING, OBJECT, ARRAY.
types_checked AS (
  SELECT
    *,
    try_element_at(
      transform(
        filter(
          transform(
            typed_fields,
            f -> named_struct(
              'field', f.field,
              'expected', f.expected,
              'type', CASE
                WHEN schema_of_variant(f.value) RLIKE '^(BIGINT|DECIMAL\\([0-9]+,0\\))$'
                  THEN 'INTEGER'
                ELSE regexp_extract(schema_of_variant(f.value), '^[A-Z]+', 0)
              END
            )
          ),
          f -> f.type != 'VOID' AND NOT (
            f.type = f.expected
            OR f.expected = 'NUMBER' AND f.type IN ('INTEGER', 'DECIMAL', 'DOUBLE')
            OR f.expected = 'STRING or INTEGER' AND f.type IN ('STRING', 'INTEGER')
          )
        ),
        f -> concat('wrong type: ', f.field, ' is ', f.type, ', expected ', f.expected)
      ),
      1
    ) AS wrong_type
  FROM expected_types
),
fields AS (
  SELECT
    utf8,
    raw,
    origin,
    utf8 AND NOT regular AND doc IS NULL AS malformed,
    doc IS NOT NULL
      AND coalesce(array_size(try_variant_get(wrapped, '$', 'array<variant>')) != 1, true)
      AS text_after,
    wrong_type,
    if(regular, j.device_id, try_variant_get(doc, '$.device_id', 'string')) AS device_id,
    if(regular, j.sensor_freq, try_variant_get(doc, '$.sensor_freq', 'double')) AS sensor_freq,
    if(regular, j.event_time, try_variant_get(doc, '$.event_time', 'string')) AS event_time_text
  FROM types_checked
),
typed AS (
  SELECT *, try_to_timestamp(event_time_text) AS event_time
  FROM fields
),
-- The reasons checked since the start come first, so a record keeps the reason it always had;
-- later checks only catch records that used to pass.
judged AS (
  SELECT
    *,
    CASE
      WHEN NOT utf8 THEN 'invalid UTF-8 (raw is base64)'
      WHEN malformed THEN 'malformed JSON'
      WHEN device_id IS NULL OR trim(device_id) = '' THEN 'missing device_id'
      WHEN sensor_freq IS NULL THEN 'missing or non-numeric sensor_freq'
      WHEN event_time_text IS NULL THEN 'missing event_time'
      WHEN event_time IS NULL THEN concat('unparseable event_time: ', event_time_text)
      WHEN wrong_type IS NOT NULL THEN wrong_type
      WHEN text_after THEN 'text after the JSON object'
    END AS reject_reason
  FROM typed
)
SELECT
  raw,
  origin,
  device_id,
  sensor_freq,
  if(reject_reason IS NULL, event_time, NULL) AS event_time,
  sensor_freq < 0 AS is_anomalous,
  reject_reason
FROM judged
