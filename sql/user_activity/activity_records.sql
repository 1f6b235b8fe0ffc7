-- Every input record of the activity-data layout parsed and typed, with the reason it cannot
-- be used (reject_reason is NULL for a usable one). event_time is Creation_Time (ns) exactly.
--
-- The values are those of the record read as VARIANT (try_parse_json, try_variant_get). A
-- regular record is read with from_json instead, which is cheaper and gives the very same values;
-- any other record is still read as VARIANT (see `checked` below).
CREATE OR REPLACE TEMP VIEW activity_records AS
WITH records AS (
  SELECT
    value AS raw,
    origin,
    from_json(
      value,
      'User STRING, Creation_Time BIGINT, Arrival_Time BIGINT, gt STRING, Device STRING,
       Model STRING, Index BIGINT, x DOUBLE, y DOUBLE, z DOUBLE, _corrupt_record STRING',
      -- As strict as VARIANT's parser. A record that is not a JSON object, or has a value that
      -- does not fit its field's type (a BIGINT that is not a JSON integer), gets _corrupt_record.
      map(
        'mode', 'PERMISSIVE', 'columnNameOfCorruptRecord', '_corrupt_record',
        'allowSingleQuotes', 'false', 'allowNonNumericNumbers', 'false'
      )
    ) AS j
  FROM raw_activity
),
-- A record is regular when from_json reads it exactly as VARIANT does:
-- * from_json read a JSON object without error, so each BIGINT is a JSON integer and each
--   DOUBLE a JSON number; and there is no \u escape (VARIANT rejects a lone surrogate such as
--   \ud800, from_json does not);
-- * each text field was a JSON string. A number, object or array read into a STRING field is
--   written differently by the two (0.0000001 is 1.0E-7 for from_json; VARIANT sorts the keys
--   of an object), and it always makes a whole line of the concat_ws below matching the pattern;
-- * no -0.0 in x, y, z: it is the double -0.0 for from_json, the decimal 0 for VARIANT;
-- * all ten fields there, none NULL, and no other key: a key has one colon, so splitting the
--   record at ':' gives eleven pieces (a colon in a text makes the record irregular). So no
--   duplicate key either, which VARIANT rejects and from_json reads as its last value.
checked AS (
  SELECT
    raw,
    origin,
    j,
    coalesce(
      j._corrupt_record IS NULL
      AND NOT contains(raw, '\\u')
      AND NOT concat_ws('\n', j.User, j.gt, j.Device, j.Model)
        RLIKE '(?m)^(-?[0-9][0-9.eE+-]*$|[\\[{"])'
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
parsed AS (
  SELECT *, CASE WHEN NOT regular THEN try_parse_json(raw) END AS doc
  FROM checked
),
fields AS (
  SELECT
    raw,
    origin,
    NOT regular AND doc IS NULL AS malformed,
    if(regular, j.User, try_variant_get(doc, '$.User', 'string')) AS user,
    if(regular, j.Creation_Time, try_variant_get(doc, '$.Creation_Time', 'bigint')) AS creation_ns,
    if(regular, j.Arrival_Time, try_variant_get(doc, '$.Arrival_Time', 'bigint')) AS arrival_ms,
    if(regular, j.gt, try_variant_get(doc, '$.gt', 'string')) AS activity,
    if(regular, j.Device, try_variant_get(doc, '$.Device', 'string')) AS device,
    if(regular, j.Model, try_variant_get(doc, '$.Model', 'string')) AS model,
    if(regular, j.Index, try_variant_get(doc, '$.Index', 'bigint')) AS reading_index,
    if(regular, j.x, try_variant_get(doc, '$.x', 'double')) AS x,
    if(regular, j.y, try_variant_get(doc, '$.y', 'double')) AS y,
    if(regular, j.z, try_variant_get(doc, '$.z', 'double')) AS z
  FROM parsed
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
    WHEN malformed THEN 'malformed JSON'
    WHEN user IS NULL OR trim(user) = '' THEN 'missing User'
    WHEN creation_ns IS NULL THEN 'missing or non-numeric Creation_Time'
    WHEN activity IS NULL OR trim(activity) = '' THEN 'missing gt (activity)'
  END AS reject_reason
FROM fields
