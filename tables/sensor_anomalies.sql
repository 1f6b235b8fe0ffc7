-- Anomalous readings (sensor_freq < 0), as they arrived; also sent to Kafka at once.
CREATE TABLE sensor_anomalies (
  device_id STRING NOT NULL COMMENT 'Sensor device id',
  sensor_freq DOUBLE NOT NULL COMMENT 'The negative reading',
  event_time TIMESTAMP NOT NULL COMMENT 'When the reading was taken (UTC)',
  detected_at TIMESTAMP NOT NULL COMMENT 'When the pipeline saw it (batch time)'
) USING DELTA
TBLPROPERTIES ('lake.mode' = 'append')
