-- Anomalous readings as they arrive: no watermark and no state, so a late anomaly still alerts.
CREATE OR REPLACE TEMP VIEW anomalies AS
SELECT device_id, sensor_freq, event_time, current_timestamp() AS detected_at
FROM valid_readings
WHERE is_anomalous
