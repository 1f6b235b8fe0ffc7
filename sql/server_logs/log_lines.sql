-- Usable log lines. Exact duplicates (every field equal) are dropped while within the
-- watermark; lines behind the watermark are dropped as late and counted in the run report.
CREATE OR REPLACE TEMP VIEW log_lines AS
SELECT DISTINCT customer_id, event_time, event_type, items, source, logged_out
FROM checked_lines WATERMARK event_time DELAY OF INTERVAL 1 MINUTE
