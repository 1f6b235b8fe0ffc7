-- Every server-log line parsed into its fields and items, with the reason it cannot be read
-- (reject_reason is NULL for a readable line). Timestamps look like 20:06:2019 0:46:1. The
-- rules on the values of a readable line are expectations in checked_lines.sql.
--
-- The values are those of the line read as VARIANT (try_parse_json, try_variant_get). A
-- regular line is read with from_json instead, which is cheaper and gives the very same values;
-- any other line is still read as VARIANT (see `checked` below). Neither may coerce: a field
-- whose JSON type is not the format's is a reject reason (see `wrong_type`).
CREATE OR REPLACE TEMP VIEW parsed_logs AS
WITH texts AS (
  -- Spark's text source keeps a line's bytes as they are. A line that is not valid UTF-8 is
  -- not parsed (a parser would read replacement characters) and its raw text is the base64 of
  -- its bytes, so the quarantine keeps it losslessly.
  SELECT value, origin, coalesce(is_valid_utf8(value), true) AS utf8
  FROM raw_logs
),
lines AS (
  SELECT
    utf8,
    -- base64 breaks its text into lines of 76 characters (spark.sql.chunkBase64String.enabled):
    -- without the breaks raw is one plain base64 string, whatever that setting.
    if(utf8, value, regexp_replace(base64(CAST(value AS BINARY)), '\\s', '')) AS raw,
    origin,
    from_json(
      if(utf8, value, NULL),
      'CustomerId STRING, timestamp STRING, Source STRING,
       EventType STRUCT<
         AddToCart: STRUCT<ProductId: STRING, Price: DOUBLE>,
         ProductView: STRUCT<ProductId: STRING, Price: DOUBLE>,
         Purchase: ARRAY<STRUCT<ProductId: STRING, Price: STRING, Quantity: INT>>>,
       _corrupt_record STRING',
      -- As strict as VARIANT's parser. A line that is not a JSON object, or has a value that
      -- does not fit its field's type, gets _corrupt_record.
      map(
        'mode', 'PERMISSIVE', 'columnNameOfCorruptRecord', '_corrupt_record',
        'allowSingleQuotes', 'false', 'allowNonNumericNumbers', 'false'
      )
    ) AS j
  FROM texts
),
-- A line is regular when from_json reads it exactly as VARIANT does:
-- * from_json read a JSON object without error, so each Price is a JSON number and each
--   Quantity a JSON integer; and there is no \u escape (VARIANT rejects a lone surrogate such as
--   \ud800, from_json does not);
-- * each text field was a JSON string. A number, boolean, object or array read into a STRING
--   field is written differently by the two (0.0000001 is 1.0E-7 for from_json; VARIANT sorts
--   the keys of an object) or is the wrong type, and it always makes a whole line of the
--   concat_ws below matching the pattern;
-- * Price > 0 for AddToCart and ProductView: -0.0 is the double -0.0 for from_json, the decimal
--   0 for VARIANT (a zero or negative Price is rare: such a line is just read as VARIANT);
-- * the line ends with the object's closing brace, and has as many closing braces as its
--   objects (the line, EventType, and the event or each item): from_json reads the first JSON
--   value of a line and ignores any text after it. Such a line is read as VARIANT, where that
--   text is a reject reason (see `wrapped`); a brace in a text field also sends a line there;
-- * one event type with all its fields, none NULL, and no other key anywhere: a key has one
--   colon, so splitting the line at ':' gives one piece per key, plus one, plus the timestamp's
--   own colons (a colon in any other text makes the line irregular). So no duplicate key either,
--   which VARIANT rejects and from_json reads as its last value. A Purchase's fields are checked
--   as arrays, without a lambda (Spark interprets a lambda row by row, outside its generated
--   code): array_contains(a, v) is NULL when a holds a NULL and not v, so an item without the
--   field makes the line irregular; so does an empty ProductId or Price or a zero Quantity, which
--   only sends a rare line down the slower path.
checked AS (
  SELECT
    utf8,
    raw,
    origin,
    j,
    coalesce(
      j._corrupt_record IS NULL
      AND endswith(raw, '}')
      AND size(split(raw, '}')) = if(j.EventType.Purchase IS NULL, 4, 3 + size(j.EventType.Purchase))
      AND NOT contains(raw, '\\u')
      AND NOT concat_ws(
        '\n', j.CustomerId, j.timestamp, j.Source,
        j.EventType.AddToCart.ProductId, j.EventType.ProductView.ProductId,
        j.EventType.Purchase.ProductId, j.EventType.Purchase.Price
      ) RLIKE '(?m)^(-?[0-9][0-9.eE+-]*$|true$|false$|[\\[{"])'
      AND j.CustomerId IS NOT NULL AND j.timestamp IS NOT NULL AND j.Source IS NOT NULL
      AND size(split(raw, ':')) = size(split(j.timestamp, ':'))
          + 5 -- CustomerId, timestamp, EventType, Source, the event type
          + CASE
            WHEN j.EventType.ProductView IS NULL AND j.EventType.Purchase IS NULL
              AND j.EventType.AddToCart.ProductId IS NOT NULL
              AND j.EventType.AddToCart.Price > 0
              THEN 2
            WHEN j.EventType.AddToCart IS NULL AND j.EventType.Purchase IS NULL
              AND j.EventType.ProductView.ProductId IS NOT NULL
              AND j.EventType.ProductView.Price > 0
              THEN 2
            WHEN j.EventType.AddToCart IS NULL AND j.EventType.ProductView IS NULL
              AND NOT array_contains(j.EventType.Purchase.ProductId, '')
              AND NOT array_contains(j.EventType.Purchase.Price, '')
              AND NOT array_contains(j.EventType.Purchase.Quantity, 0)
              THEN 3 * size(j.EventType.Purchase)
          END,
      false
    ) AS regular
  FROM lines
),
-- VARIANT's parser also reads only a line's first JSON value. Inside brackets, any text after it
-- makes the array invalid ({...} xyz, {...}{...}) or a second element ({...}, {...}).
parsed AS (
  SELECT
    *,
    CASE WHEN utf8 AND NOT regular THEN try_parse_json(raw) END AS doc,
    CASE WHEN utf8 AND NOT regular THEN try_parse_json(concat('[', raw, ']')) END AS wrapped
  FROM checked
),
-- Each field of a line read as VARIANT, with the JSON type the format gives it: STRING,
-- NUMBER (an integer, decimal or double) or INTEGER. Purchase prices are strings ("12.5$").
expected_types AS (
  SELECT
    *,
    CASE WHEN doc IS NOT NULL THEN concat(
      array(
        named_struct(
          'field', 'CustomerId', 'value', try_variant_get(doc, '$.CustomerId', 'variant'),
          'expected', 'STRING'
        ),
        named_struct(
          'field', 'timestamp', 'value', try_variant_get(doc, '$.timestamp', 'variant'),
          'expected', 'STRING'
        ),
        named_struct(
          'field', 'Source', 'value', try_variant_get(doc, '$.Source', 'variant'),
          'expected', 'STRING'
        ),
        named_struct(
          'field', 'ProductId',
          'value', try_variant_get(doc, '$.EventType.AddToCart.ProductId', 'variant'),
          'expected', 'STRING'
        ),
        named_struct(
          'field', 'Price',
          'value', try_variant_get(doc, '$.EventType.AddToCart.Price', 'variant'),
          'expected', 'NUMBER'
        ),
        named_struct(
          'field', 'ProductId',
          'value', try_variant_get(doc, '$.EventType.ProductView.ProductId', 'variant'),
          'expected', 'STRING'
        ),
        named_struct(
          'field', 'Price',
          'value', try_variant_get(doc, '$.EventType.ProductView.Price', 'variant'),
          'expected', 'NUMBER'
        )
      ),
      flatten(transform(
        coalesce(
          try_variant_get(doc, '$.EventType.Purchase', 'array<variant>'),
          CAST(array() AS ARRAY<VARIANT>)
        ),
        p -> array(
          named_struct(
            'field', 'ProductId', 'value', try_variant_get(p, '$.ProductId', 'variant'),
            'expected', 'STRING'
          ),
          named_struct(
            'field', 'Price', 'value', try_variant_get(p, '$.Price', 'variant'),
            'expected', 'STRING'
          ),
          named_struct(
            'field', 'Quantity', 'value', try_variant_get(p, '$.Quantity', 'variant'),
            'expected', 'INTEGER'
          )
        )
      ))
    ) END AS typed_fields
  FROM parsed
),
-- The first field whose JSON type is not the expected one, e.g. an object as CustomerId (which
-- VARIANT would read as its JSON text) or 1.5 as Quantity (read as 1). A JSON null or absent
-- field is left to the missing-field checks; a regular line has the right types by
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
    regular,
    utf8 AND NOT regular AND doc IS NULL AS malformed,
    doc IS NOT NULL
      AND coalesce(array_size(try_variant_get(wrapped, '$', 'array<variant>')) != 1, true)
      AS text_after,
    wrong_type,
    if(regular, j.CustomerId, try_variant_get(doc, '$.CustomerId', 'string')) AS customer_id,
    if(regular, j.timestamp, try_variant_get(doc, '$.timestamp', 'string')) AS timestamp_text,
    if(regular, j.Source, try_variant_get(doc, '$.Source', 'string')) AS source,
    if(
      regular,
      j.EventType.AddToCart,
      try_variant_get(doc, '$.EventType.AddToCart', 'struct<ProductId string, Price double>')
    ) AS add,
    if(
      regular,
      j.EventType.ProductView,
      try_variant_get(doc, '$.EventType.ProductView', 'struct<ProductId string, Price double>')
    ) AS view,
    if(
      regular,
      j.EventType.Purchase,
      try_variant_get(
        doc, '$.EventType.Purchase', 'array<struct<ProductId string, Price string, Quantity int>>'
      )
    ) AS purchase
  FROM types_checked
),
typed AS (
  SELECT
    *,
    try_to_timestamp(timestamp_text, 'd:M:yyyy H:m:s') AS event_time,
    CASE
      WHEN add IS NOT NULL THEN 'add_to_cart'
      WHEN view IS NOT NULL THEN 'product_view'
      WHEN purchase IS NOT NULL THEN 'purchase'
    END AS event_type,
    CASE
      WHEN add IS NOT NULL THEN
        array(named_struct('product_id', add.ProductId, 'price', add.Price, 'quantity', 1))
      WHEN view IS NOT NULL THEN
        array(named_struct('product_id', view.ProductId, 'price', view.Price, 'quantity', 1))
      ELSE transform(
        purchase,
        p -> named_struct(
          'product_id', p.ProductId,
          -- A number with a $ before or after it; 12$5, 0x1p3$ or 7d are not a price.
          'price', CASE
            WHEN p.Price RLIKE '(?i)^\\s*[$]?\\s*([+-]?([0-9]+[.]?[0-9]*|[.][0-9]+)(e[+-]?[0-9]+)?|[+-]?inf(inity)?|nan)\\s*[$]?\\s*$'
              THEN try_cast(trim(replace(p.Price, '$', '')) AS DOUBLE)
          END,
          'quantity', p.Quantity
        )
      )
    END AS items
  FROM fields
),
-- The reasons checked since the start come first, so a line keeps the reason it always had;
-- later checks only catch lines that used to pass. The item checks avoid lambdas where they can
-- (see `checked`): every item of a regular line has its ProductId, and array_contains is NULL
-- when an item lacks its price or quantity (a price of -1 or a quantity of 0 fails anyway).
judged AS (
  SELECT
    *,
    CASE
      WHEN NOT utf8 THEN 'invalid UTF-8 (raw is base64)'
      WHEN trim(raw) = '' THEN 'empty line'
      WHEN malformed THEN 'malformed JSON'
      WHEN customer_id IS NULL OR trim(customer_id) = '' THEN 'missing CustomerId'
      WHEN timestamp_text IS NULL THEN 'missing timestamp'
      WHEN event_time IS NULL THEN concat('unparseable timestamp: ', timestamp_text)
      WHEN event_type IS NULL THEN 'missing or unknown EventType'
      WHEN size(items) = 0 THEN 'Purchase without items'
      WHEN NOT regular AND exists(items, i -> i.product_id IS NULL)
        THEN 'item without ProductId'
      WHEN coalesce(array_contains(items.price, -1D) OR array_min(items.price) < 0, true)
        THEN 'missing, negative or unparseable Price'
      WHEN coalesce(array_contains(items.quantity, 0) OR array_min(items.quantity) < 1, true)
        THEN 'missing or non-positive Quantity'
      WHEN wrong_type IS NOT NULL THEN wrong_type
      WHEN text_after THEN 'text after the JSON object'
      WHEN (add IS NOT NULL) AND (view IS NOT NULL OR purchase IS NOT NULL)
        OR view IS NOT NULL AND purchase IS NOT NULL
        THEN 'more than one EventType'
    END AS reject_reason
  FROM typed
)
SELECT
  raw,
  origin,
  customer_id,
  if(reject_reason IS NULL, event_time, NULL) AS event_time,
  event_type,
  items,
  source,
  coalesce(source = 'LoggedOut', false) AS logged_out,
  reject_reason
FROM judged
