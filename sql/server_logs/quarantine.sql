-- Lines that cannot be used, with the reason, for the shared `quarantine` table.
CREATE OR REPLACE TEMP VIEW quarantine AS
SELECT
  'server_logs' AS pipeline,
  source_file AS source,
  raw,
  reject_reason AS reason,
  current_timestamp() AS ingested_at
FROM parsed_logs
WHERE reject_reason IS NOT NULL
