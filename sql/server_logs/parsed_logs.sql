-- Every server-log line parsed into its fields and items, with the reason it cannot be used
-- (reject_reason is NULL for a usable line). Timestamps look like 20:06:2019 0:46:1.
CREATE OR REPLACE TEMP VIEW parsed_logs AS
WITH lines AS (
  SELECT value AS raw, source_file, try_parse_json(value) AS doc
  FROM raw_logs
),
fields AS (
  SELECT
    raw,
    source_file,
    doc,
    try_variant_get(doc, '$.CustomerId', 'string') AS customer_id,
    try_variant_get(doc, '$.timestamp', 'string') AS timestamp_text,
    try_to_timestamp(try_variant_get(doc, '$.timestamp', 'string'), 'd:M:yyyy H:m:s') AS event_time,
    try_variant_get(doc, '$.Source', 'string') AS source,
    try_variant_get(doc, '$.EventType.AddToCart', 'struct<ProductId string, Price double>') AS add,
    try_variant_get(doc, '$.EventType.ProductView', 'struct<ProductId string, Price double>') AS view,
    try_variant_get(
      doc, '$.EventType.Purchase', 'array<struct<ProductId string, Price string, Quantity int>>'
    ) AS purchase
  FROM lines
),
typed AS (
  SELECT
    *,
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
          'price', try_cast(trim(replace(p.Price, '$', '')) AS DOUBLE),
          'quantity', p.Quantity
        )
      )
    END AS items
  FROM fields
)
SELECT
  raw,
  source_file,
  customer_id,
  event_time,
  event_type,
  items,
  source,
  coalesce(source = 'LoggedOut', false) AS logged_out,
  CASE
    WHEN trim(raw) = '' THEN 'empty line'
    WHEN doc IS NULL THEN 'malformed JSON'
    WHEN customer_id IS NULL OR trim(customer_id) = '' THEN 'missing CustomerId'
    WHEN timestamp_text IS NULL THEN 'missing timestamp'
    WHEN event_time IS NULL THEN concat('unparseable timestamp: ', timestamp_text)
    WHEN event_type IS NULL THEN 'missing or unknown EventType'
    WHEN size(items) = 0 THEN 'Purchase without items'
    WHEN exists(items, i -> i.product_id IS NULL) THEN 'item without ProductId'
    WHEN exists(items, i -> i.price IS NULL OR i.price < 0) THEN 'missing, negative or unparseable Price'
    WHEN exists(items, i -> i.quantity IS NULL OR i.quantity < 1) THEN 'missing or non-positive Quantity'
  END AS reject_reason
FROM typed
