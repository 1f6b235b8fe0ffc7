-- Readable readings held to the rules on their values, before the watermark of readings and
-- the anomaly rule see them. A reading that breaks a rule goes to quarantine as
-- `expectation <name>`, its fields as JSON in raw (the record as read is its field raw).
--
-- Event times from 2000-01-01 to one day after the batch's time (in a micro-batch
-- current_timestamp() is the batch's timestamp, kept in the offset log, so a replay decides
-- the same): a year 2200 would move the watermark so far that every later reading is late,
-- and 9999 does not fit the handler.
-- CONSTRAINT event_time_in_range EXPECT (event_time BETWEEN TIMESTAMP '2000-01-01 00:00:00' AND current_timestamp() + INTERVAL 1 DAY) ON VIOLATION DROP ROW
-- No NaN, Infinity or number past the double range (1e400).
-- CONSTRAINT finite_sensor_freq EXPECT (NOT isnan(sensor_freq) AND abs(sensor_freq) != double('Infinity')) ON VIOLATION DROP ROW
CREATE OR REPLACE TEMP VIEW valid_readings AS
SELECT raw, origin, device_id, sensor_freq, event_time, is_anomalous
FROM sensor_readings
WHERE reject_reason IS NULL
