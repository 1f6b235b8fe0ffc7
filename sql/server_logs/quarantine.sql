-- Lines that cannot be used, with the reason, for the shared `quarantine` table.
-- raw is the input as read, or the base64 of its bytes when it is not valid UTF-8 (reason
-- 'invalid UTF-8 (raw is base64)').
CREATE OR REPLACE TEMP VIEW quarantine AS
SELECT
  'server_logs' AS pipeline,
  origin AS source,
  raw,
  reject_reason AS reason,
  current_timestamp() AS ingested_at
FROM parsed_logs
WHERE reject_reason IS NOT NULL
