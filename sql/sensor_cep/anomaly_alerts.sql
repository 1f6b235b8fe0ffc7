-- Anomalies as Kafka messages: keyed by device, the reading as a JSON value.
CREATE OR REPLACE TEMP VIEW anomaly_alerts AS
SELECT
  device_id AS key,
  to_json(named_struct(
    'device_id', device_id,
    'sensor_freq', sensor_freq,
    'event_time', event_time,
    'detected_at', detected_at
  )) AS value
FROM anomalies
