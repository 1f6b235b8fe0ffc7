-- The closed windows' samples, with the date partition of `sensor_samples`.
CREATE OR REPLACE TEMP VIEW sensor_samples AS
SELECT *, to_date(window_start) AS part_date
FROM window_samples
