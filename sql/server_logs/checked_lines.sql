-- Readable log lines held to the rules on their values, before the watermark of log_lines sees
-- them. A line that breaks a rule goes to quarantine as `expectation <name>`, its fields as
-- JSON in raw (the line as read is its field raw).
--
-- Event times from 2000-01-01 to one day after the batch's time (in a micro-batch
-- current_timestamp() is the batch's timestamp, kept in the offset log, so a replay decides
-- the same): a year 2200 would move the watermark so far that every later line is late, and
-- 9999 does not fit the handlers.
-- CONSTRAINT event_time_in_range EXPECT (event_time BETWEEN TIMESTAMP '2000-01-01 00:00:00' AND current_timestamp() + INTERVAL 1 DAY) ON VIOLATION DROP ROW
-- No NaN, Infinity or number past the double range ("NaN$", "1e309$", 1e400) as a price,
-- and no amount that overflows to Infinity.
-- CONSTRAINT finite_prices EXPECT (forall(items, i -> NOT isnan(i.price) AND abs(i.price) != double('Infinity'))) ON VIOLATION DROP ROW
-- CONSTRAINT finite_amounts EXPECT (forall(items, i -> abs(i.price * i.quantity) != double('Infinity'))) ON VIOLATION DROP ROW
CREATE OR REPLACE TEMP VIEW checked_lines AS
SELECT raw, origin, customer_id, event_time, event_type, items, source, logged_out
FROM parsed_logs
WHERE reject_reason IS NULL
