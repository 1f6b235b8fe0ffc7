-- Every input record of the activity-data layout parsed and typed, with the reason it cannot
-- be used (reject_reason is NULL for a usable one). event_time is Creation_Time (ns) exactly.
--
-- The values are those of the record read as VARIANT (try_parse_json, try_variant_get). A
-- regular record is read with from_json instead, which is cheaper and gives the very same values;
-- any other record is still read as VARIANT (see `checked` below). Neither may coerce: a field
-- whose JSON type is not the layout's is a reject reason (see `wrong_type`).
CREATE OR REPLACE TEMP VIEW activity_records AS
WITH texts AS (
  -- Spark's text source keeps a record's bytes as they are. A record that is not valid UTF-8
  -- is not parsed (a parser would read replacement characters) and its raw text is the base64
  -- of its bytes, so the quarantine keeps it losslessly.
  SELECT value, origin, coalesce(is_valid_utf8(value), true) AS utf8
  FROM raw_activity
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
      'User STRING, Creation_Time BIGINT, Arrival_Time BIGINT, gt STRING, Device STRING,
       Model STRING, Index BIGINT, x DOUBLE, y DOUBLE, z DOUBLE, _corrupt_record STRING',
      -- As strict as VARIANT's parser. A record that is not a JSON object, or has a value that
      -- does not fit its field's type (a BIGINT that is not a JSON integer), gets _corrupt_record.
      map(
        'mode', 'PERMISSIVE', 'columnNameOfCorruptRecord', '_corrupt_record',
        'allowSingleQuotes', 'false', 'allowNonNumericNumbers', 'false'
      )
    ) AS j
  FROM texts
),
-- A record is regular when from_json reads it exactly as VARIANT does:
-- * from_json read a JSON object without error, so each BIGINT is a JSON integer and each
--   DOUBLE a JSON number; and there is no \u escape (VARIANT rejects a lone surrogate such as
--   \ud800, from_json does not);
-- * its one closing brace is its last character: from_json reads the first JSON value of a
--   record and ignores any text after it. Such a record is read as VARIANT, where that text is
--   a reject reason (see `wrapped`); a brace in a text field also sends a record there;
-- * each text field was a JSON string. A number, boolean, object or array read into a STRING
--   field is written differently by the two (0.0000001 is 1.0E-7 for from_json; VARIANT sorts
--   the keys of an object) or is the wrong type, and it always makes a whole line of the
--   concat_ws below matching the pattern;
-- * no -0.0 in x, y, z: it is the double -0.0 for from_json, the decimal 0 for VARIANT;
-- * all ten fields there, none NULL, and no other key: a key has one colon, so splitting the
--   record at ':' gives eleven pieces (a colon in a text makes the record irregular). So no
--   duplicate key either, which VARIANT rejects and from_json reads as its last value.
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
      AND NOT concat_ws('\n', j.User, j.gt, j.Device, j.Model)
        RLIKE '(?m)^(-?[0-9][0-9.eE+-]*$|true$|false$|[\\[{"])'
      AND NOT (j.x = 0 AND CAST(j.x AS STRING) = '-0.0')
      AND NOT (j.y = 0 AND CAST(j.y AS STRING) = '-0.0')
      AND NOT (j.z = 0 AND CAST(j.z AS STRING) = '-0.0')
      AND j.User IS NOT NULL AND j.Creation_Time IS NOT NULL AND j.Arrival_Time IS NOT NULL
      AND j.gt IS NOT NULL AND j.Device IS NOT NULL AND j.Model IS NOT NULL
      AND j.Index IS NOT NULL AND j.x IS NOT NULL AND j.y IS NOT NULL AND j.z IS NOT NULL
      AND size(split(raw, ':')) = 11,
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
-- The first field of a record read as VARIANT whose JSON type is not the layout's (STRING,
-- INTEGER, or NUMBER: an integer, decimal or double), e.g. a boolean as User (which VARIANT
-- would read as "true") or "1424686733" as Creation_Time. A JSON null or absent field is left
-- to the missing-field checks; a regular record has the right types by construction.
-- schema_of_variant names the type: an integer (BIGINT, or DECIMAL(n,0) past 18 digits) is
-- called INTEGER here; 1.5 is DECIMAL, 1e5 DOUBLE; then BOOLEAN, STRING, OBJECT, ARRAY.
expected_types AS (
  SELECT
    *,
    CASE WHEN doc IS NOT NULL THEN array(
      named_struct(
        'field', 'User', 'value', try_variant_get(doc, '$.User', 'variant'),
        'expected', 'STRING'
      ),
      named_struct(
        'field', 'Creation_Time', 'value', try_variant_get(doc, '$.Creation_Time', 'variant'),
        'expected', 'INTEGER'
      ),
      named_struct(
        'field', 'Arrival_Time', 'value', try_variant_get(doc, '$.Arrival_Time', 'variant'),
        'expected', 'INTEGER'
      ),
      named_struct(
        'field', 'gt', 'value', try_variant_get(doc, '$.gt', 'variant'),
        'expected', 'STRING'
      ),
      named_struct(
        'field', 'Device', 'value', try_variant_get(doc, '$.Device', 'variant'),
        'expected', 'STRING'
      ),
      named_struct(
        'field', 'Model', 'value', try_variant_get(doc, '$.Model', 'variant'),
        'expected', 'STRING'
      ),
      named_struct(
        'field', 'Index', 'value', try_variant_get(doc, '$.Index', 'variant'),
        'expected', 'INTEGER'
      ),
      named_struct(
        'field', 'x', 'value', try_variant_get(doc, '$.x', 'variant'),
        'expected', 'NUMBER'
      ),
      named_struct(
        'field', 'y', 'value', try_variant_get(doc, '$.y', 'variant'),
        'expected', 'NUMBER'
      ),
      named_struct(
        'field', 'z', 'value', try_variant_get(doc, '$.z', 'variant'),
        'expected', 'NUMBER'
      )
    ) END AS typed_fields
  FROM parsed
),
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
    if(regular, j.User, try_variant_get(doc, '$.User', 'string')) AS user,
    if(regular, j.Creation_Time, try_variant_get(doc, '$.Creation_Time', 'bigint')) AS creation_ns,
    if(regular, j.Arrival_Time, try_variant_get(doc, '$.Arrival_Time', 'bigint')) AS arrival_ms,
    -- An integer past BIGINT reads as NULL above, as an allowed missing Arrival_Time does.
    try_variant_get(doc, '$.Arrival_Time', 'decimal(38,0)') AS arrival_whole,
    if(regular, j.gt, try_variant_get(doc, '$.gt', 'string')) AS activity,
    if(regular, j.Device, try_variant_get(doc, '$.Device', 'string')) AS device,
    if(regular, j.Model, try_variant_get(doc, '$.Model', 'string')) AS model,
    if(regular, j.Index, try_variant_get(doc, '$.Index', 'bigint')) AS reading_index,
    if(regular, j.x, try_variant_get(doc, '$.x', 'double')) AS x,
    if(regular, j.y, try_variant_get(doc, '$.y', 'double')) AS y,
    if(regular, j.z, try_variant_get(doc, '$.z', 'double')) AS z
  FROM types_checked
),
-- The sane range of times: from 2000-01-01 to one day after the batch's time (in a
-- micro-batch current_timestamp() is the batch's timestamp, kept in the offset log, so a replay
-- decides the same). These two literals are the setting. A time far ahead would move the
-- watermark so far that every later record is late; past 2262 it does not fit the handler.
bounded AS (
  SELECT
    *,
    timestamp_micros(creation_ns DIV 1000) AS event_time,
    arrival_ms BETWEEN unix_millis(TIMESTAMP '2000-01-01 00:00:00')
      AND unix_millis(current_timestamp() + INTERVAL 1 DAY) AS arrival_in_range
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
      WHEN user IS NULL OR trim(user) = '' THEN 'missing User'
      WHEN creation_ns IS NULL THEN 'missing or non-numeric Creation_Time'
      WHEN activity IS NULL OR trim(activity) = '' THEN 'missing gt (activity)'
      WHEN wrong_type IS NOT NULL THEN wrong_type
      WHEN event_time < TIMESTAMP '2000-01-01 00:00:00'
        OR event_time > current_timestamp() + INTERVAL 1 DAY
        THEN concat('Creation_Time out of range: ', creation_ns)
      WHEN NOT arrival_in_range THEN concat('Arrival_Time out of range: ', arrival_ms)
      WHEN arrival_ms IS NULL AND arrival_whole IS NOT NULL
        THEN concat('Arrival_Time out of range: ', arrival_whole)
      -- NaN, Infinity and numbers past the double range (1e400).
      WHEN isnan(x) OR abs(x) = double('Infinity') THEN 'non-finite number: x'
      WHEN isnan(y) OR abs(y) = double('Infinity') THEN 'non-finite number: y'
      WHEN isnan(z) OR abs(z) = double('Infinity') THEN 'non-finite number: z'
      WHEN text_after THEN 'text after the JSON object'
    END AS reject_reason
  FROM bounded
)
SELECT
  raw,
  origin,
  user,
  -- Only a usable record's time may reach the watermark of activity_events.
  if(reject_reason IS NULL, event_time, NULL) AS event_time,
  -- timestamp_millis fails on a value past its range: only a value in range is converted.
  if(arrival_in_range, timestamp_millis(arrival_ms), NULL) AS arrival_time,
  activity,
  device,
  model,
  reading_index,
  x,
  y,
  z,
  reject_reason
FROM judged
