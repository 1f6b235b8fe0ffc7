-- Usable readings under a 30 s watermark. A reading sent twice (a producer retry) is dropped
-- while within the watermark; readings behind it are dropped as late and counted in the run
-- report (windows they belong to may already be closed).
CREATE OR REPLACE TEMP VIEW readings AS
SELECT DISTINCT device_id, sensor_freq, event_time, is_anomalous
FROM valid_readings WATERMARK event_time DELAY OF INTERVAL 30 SECONDS
