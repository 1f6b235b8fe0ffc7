-- Samples of closed 60 s windows (sliding every 30 s): first, middle and last normal reading
-- and every anomalous one. A reading is in two windows, so it can be sampled twice.
CREATE TABLE sensor_samples (
  window_start TIMESTAMP NOT NULL COMMENT 'Start of the window (inclusive)',
  window_end TIMESTAMP NOT NULL COMMENT 'End of the window (exclusive)',
  device_id STRING NOT NULL COMMENT 'Sensor device id',
  sensor_freq DOUBLE NOT NULL COMMENT 'Reading; negative is an anomaly',
  event_time TIMESTAMP NOT NULL COMMENT 'When the reading was taken (UTC)',
  is_anomalous BOOLEAN NOT NULL COMMENT 'sensor_freq < 0',
  part_date DATE NOT NULL COMMENT 'Date of window_start, the partition column'
) USING DELTA
PARTITIONED BY (part_date)
TBLPROPERTIES ('lake.mode' = 'append')
