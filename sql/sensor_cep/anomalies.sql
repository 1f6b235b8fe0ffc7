-- Anomalous readings as they arrive: no watermark and no state, so a late anomaly still alerts.
CREATE OR REPLACE TEMP VIEW anomalies AS
SELECT device_id, sensor_freq, event_time, current_timestamp() AS detected_at
FROM sensor_readings
WHERE reject_reason IS NULL AND is_anomalous
