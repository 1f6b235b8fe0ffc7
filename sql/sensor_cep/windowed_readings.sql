-- Each reading in the two 60 s windows, sliding every 30 s, that hold it. sample_group is the
-- window-sample handler's grouping key: readings with the same value are sampled together.
CREATE OR REPLACE TEMP VIEW windowed_readings AS
WITH windowed AS (
  SELECT window(event_time, '60 seconds', '30 seconds') AS w, * FROM readings
)
SELECT
  CAST(w.start AS STRING) AS sample_group,
  w.start AS window_start,
  w.end AS window_end,
  device_id,
  sensor_freq,
  event_time,
  is_anomalous
FROM windowed
