-- Orders per status per 5 s of arrival time (the seed's 5 s batches). The query runs in
-- update mode: a window's count is written as it grows and merged by (window_start, status).
CREATE OR REPLACE TEMP VIEW order_counts AS
SELECT
  window.start AS window_start,
  window.end AS window_end,
  status,
  count(*) AS orders
FROM orders WATERMARK arrival_time DELAY OF INTERVAL 10 SECONDS
WHERE reject_reason IS NULL
GROUP BY window(arrival_time, '5 seconds'), status
