-- Running total of orders per status since the pipeline started (the seed's
-- updateStateByKey), with the arrival time of the newest order counted.
CREATE OR REPLACE TEMP VIEW order_totals AS
SELECT status, count(*) AS orders, max(arrival_time) AS updated_at
FROM orders
WHERE reject_reason IS NULL
GROUP BY status
