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
-- and no amount that overflows to Infinity. Both are written without a lambda where they can
-- be (a lambda costs Spark far more than its work, bench/README.md): a line's amounts are all
-- finite when its largest price times its largest quantity (in absolute value) is, and only a
-- line past that bound, or with a NULL in it, has each price times its quantity checked. The
-- rules give what these give, NULL included (tests/pipeline/test_expectations.py):
-- forall(items, i -> NOT isnan(i.price) AND abs(i.price) != double('Infinity')) and
-- forall(items, i -> abs(i.price * i.quantity) != double('Infinity')).
-- CONSTRAINT finite_prices EXPECT (NOT array_contains(items.price, double('NaN')) AND NOT array_contains(items.price, double('Infinity')) AND NOT array_contains(items.price, double('-Infinity'))) ON VIOLATION DROP ROW
-- CONSTRAINT finite_amounts EXPECT (CASE WHEN array_size(array_compact(items.price)) = array_size(items) AND array_size(array_compact(items.quantity)) = array_size(items) AND greatest(abs(array_max(items.price)), abs(array_min(items.price))) * greatest(abs(CAST(array_max(items.quantity) AS DOUBLE)), abs(CAST(array_min(items.quantity) AS DOUBLE))) < double('Infinity') THEN true ELSE forall(items, i -> abs(i.price * i.quantity) != double('Infinity')) END) ON VIOLATION DROP ROW
CREATE OR REPLACE TEMP VIEW checked_lines AS
SELECT raw, origin, customer_id, event_time, event_type, items, source, logged_out
FROM parsed_logs
WHERE reject_reason IS NULL
