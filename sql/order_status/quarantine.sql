-- Order lines that cannot be used, with the reason, for the shared `quarantine` table.
CREATE OR REPLACE TEMP VIEW quarantine AS
SELECT
  'order_status' AS pipeline,
  origin AS source,
  raw,
  reject_reason AS reason,
  current_timestamp() AS ingested_at
FROM orders
WHERE reject_reason IS NOT NULL
