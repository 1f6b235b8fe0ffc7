-- Order lines that cannot be used, with the reason, for the shared `quarantine` table.
-- raw is the input as read, or the base64 of its bytes when it is not valid UTF-8 (reason
-- 'invalid UTF-8 (raw is base64)').
CREATE OR REPLACE TEMP VIEW quarantine AS
SELECT
  'order_status' AS pipeline,
  origin AS source,
  raw,
  reject_reason AS reason,
  current_timestamp() AS ingested_at
FROM orders
WHERE reject_reason IS NOT NULL
