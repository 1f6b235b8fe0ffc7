-- Usable records, one per (user, event_time): a record with the same User and Creation_Time
-- as one already seen is a duplicate, dropped while within the 5 s watermark (this GROUP BY
-- of any_value() columns runs as streaming deduplication). Records behind the watermark are
-- dropped as late and counted in the run report.
CREATE OR REPLACE TEMP VIEW activity_events AS
SELECT
  user,
  event_time,
  any_value(activity) AS activity,
  any_value(arrival_time) AS arrival_time,
  any_value(device) AS device,
  any_value(model) AS model
FROM activity_records WATERMARK event_time DELAY OF INTERVAL 5 SECONDS
WHERE reject_reason IS NULL
GROUP BY user, event_time
