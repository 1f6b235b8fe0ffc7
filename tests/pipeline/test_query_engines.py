"""`query` on DuckDB (the default) and on Spark give the same printed rows for the same SQL."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pyspark.errors import PySparkException

from engine.errors import UserError
from engine.lake import Snapshot
from engine.query import SUBSTITUTE, run_query
from engine.query.duckdb import run_duckdb
from engine.query.functions import allowed_functions, refused_functions
from engine.query.output import print_rows
from engine.runtime.errors import spark_error_line
from tests.conftest import PROJECT
from tests.query_lake import build_lake

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_lake(tmp_path_factory.mktemp("query") / "lake")


def _round(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 6)
    if isinstance(value, dict):
        return {k: _round(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_round(v) for v in value]
    return value


def printed(result: Any) -> list[dict[str, Any]]:
    """The rows exactly as `--format json` prints them, floats rounded."""
    out = io.StringIO()
    print_rows(result, "json", out)
    return [_round(r) for r in json.loads(out.getvalue())]


QUERIES = [
    # timestamps and dates
    "SELECT customer_id, event_time, event_date FROM events",
    "SELECT date_trunc('hour', event_time) AS h, count(*) AS n FROM events GROUP BY 1",
    "SELECT to_date(event_time) AS d, hour(event_time) AS hr, minute(event_time) AS mi FROM events",
    "SELECT unix_timestamp(event_time) AS u, date_format(event_time, 'yyyy-MM-dd HH:mm') AS f "
    "FROM events",
    "SELECT customer_id, max(event_time) AS last_seen FROM events GROUP BY customer_id",
    "SELECT datediff(max(event_date), min(event_date)) AS days FROM events",
    "SELECT date_add(day, 1) AS next_day, date_sub(day, 1) AS prev, add_months(day, 1) AS nm, "
    "year(day) AS y, month(day) AS m FROM tags",
    "SELECT * FROM events WHERE event_time >= '2024-06-01 11:00:00' AND event_date = '2024-06-01'",
    # fractions of a second in a format (DuckDB printed 'SSS' as it is)
    "SELECT date_format(event_time, 'yyyy-MM-dd HH:mm:ss.SSS') AS f, "
    "to_timestamp('2024-06-01 11:59:00.250', 'yyyy-MM-dd HH:mm:ss.SSS') AS p FROM events",
    # a time as text has no zone in Spark (DuckDB's TIMESTAMPTZ added '+00')
    "SELECT CAST(event_time AS STRING) AS s, concat('t=', event_time) AS c, "
    "to_timestamp('2024-06-01 10:00:00') AS t, substr(CAST(event_time AS STRING), 12) AS hms "
    "FROM events",
    "SELECT from_utc_timestamp(event_time, 'Asia/Kolkata') AS k, "
    "to_utc_timestamp(event_time, 'America/New_York') AS ny, "
    "from_utc_timestamp(to_utc_timestamp('2024-06-01 10:00:00', 'Europe/Paris'), 'Asia/Tokyo') "
    "AS t FROM events",
    # windows (tumbling)
    "SELECT window(event_time, '5 minutes') AS w, count(*) AS n FROM events GROUP BY 1",
    "SELECT w.start AS ws, w.end AS we, sum(price) AS total FROM "
    "(SELECT window(event_time, '1 hour') AS w, price FROM events) GROUP BY w",
    "SELECT window(event_time, '1 day'), count(*) FROM events GROUP BY window(event_time, '1 day')",
    # arrays and structs
    "SELECT id, size(tags) AS n, array_contains(tags, 'b') AS has_b FROM tags",
    # an index past the end stops both (test below); get and try_element_at give NULL
    "SELECT id, tags[0] AS first, element_at(tags, -1) AS last FROM tags WHERE size(tags) > 0",
    "SELECT id, get(tags, 1) AS a, get(tags, -1) AS b, try_element_at(tags, 3) AS c, "
    "array(array(1, 2), array(3))[1][0] AS d, split(concat('x,', id), ',')[1] AS e FROM tags",
    "SELECT id, tag FROM tags LATERAL VIEW explode(tags) t AS tag",
    "SELECT id, tag FROM tags LATERAL VIEW OUTER explode(tags) t AS tag",
    "SELECT id, info.k AS k, info.n AS n, info FROM tags",
    "SELECT customer_id, p.product_id, p.price FROM carts LATERAL VIEW explode(products) x AS p",
    "SELECT customer_id, products FROM carts",
    "SELECT customer_id, element_at(products, 1).product_id AS first FROM carts",
    # aggregates
    "SELECT count(*), count(price), sum(quantity), avg(price), min(price), max(price) FROM events",
    "SELECT event_type, count(DISTINCT customer_id) AS customers, sum(price * quantity) AS amount "
    "FROM events GROUP BY event_type HAVING count(*) >= 1 ORDER BY amount DESC LIMIT 3",
    "SELECT customer_id, count(*) AS n FROM events GROUP BY customer_id HAVING n > 1",
    "SELECT source, count(*) AS n FROM events GROUP BY source ORDER BY source",
    # joins, CTEs, CASE, COALESCE
    "SELECT e.customer_id, e.product_id, c.total_items FROM events e "
    "JOIN carts c ON e.customer_id = c.customer_id",
    "SELECT e.customer_id, c.total_price FROM events e "
    "LEFT JOIN carts c ON e.customer_id = c.customer_id WHERE e.event_type = 'purchase'",
    "WITH spend AS (SELECT customer_id, sum(price) AS s FROM events GROUP BY customer_id) "
    "SELECT customer_id, CASE WHEN s > 100 THEN 'big' WHEN s > 10 THEN 'mid' ELSE 'small' END "
    "AS tier FROM spend",
    "SELECT coalesce(product_id, 'none') AS p, nvl(quantity, 0) AS q, "
    "if(price IS NULL, -1.0, round(price, 1)) AS r FROM events",
    "SELECT concat_ws('/', customer_id, event_type) AS k, upper(source) AS s, "
    "length(customer_id) AS l FROM events",
    "SELECT customer_id FROM events UNION SELECT customer_id FROM carts",
    # window functions
    "SELECT customer_id, event_time, row_number() OVER w AS rn, lag(price) OVER w AS prev, "
    "sum(price) OVER (PARTITION BY customer_id ORDER BY event_time ROWS BETWEEN UNBOUNDED "
    "PRECEDING AND CURRENT ROW) AS running FROM events "
    "WINDOW w AS (PARTITION BY customer_id ORDER BY event_time) ORDER BY customer_id, rn",
    "SELECT customer_id, price, rank() OVER (ORDER BY price DESC) AS r, "
    "dense_rank() OVER (ORDER BY price DESC) AS dr FROM events WHERE price IS NOT NULL "
    "ORDER BY r, customer_id",
    # more dates, lambdas, JSON, hints, variable references (plain text on both)
    "SELECT dayofweek(event_date) AS dow, extract(DOW FROM event_date) AS dow2, "
    "last_day(event_date) AS ld, event_time + INTERVAL 1 HOUR AS later FROM events",
    "SELECT id, transform(tags, x -> upper(x)) AS up, filter(tags, x -> x <> 'a') AS f, "
    "aggregate(tags, '', (acc, x) -> concat(acc, x)) AS agg FROM tags",
    # (DuckDB's to_json keeps NULL fields, Spark's drops them: not compared)
    "SELECT id, get_json_object(to_json(info), '$.k') AS k, "
    "to_json(named_struct('id', id, 'n', coalesce(size(tags), 0))) AS j FROM tags",
    "SELECT /*+ BROADCAST(c) */ e.customer_id, c.total_items FROM events e "
    "JOIN carts c ON e.customer_id = c.customer_id",
    "SELECT '${env:HOME}' AS h, '${system:user.name}' AS u, '${spark.app.name}' AS a",
    # stored values that are not UTF-8, NaN, infinities (tests/query_lake.py)
    "SELECT id, text, price, item, prices FROM odd",
    "SELECT count(*) AS n, max(price) AS top, sum(price) AS total FROM odd WHERE id < 3",
    # pmod: no DuckDB function; Spark's sign rules, integers and doubles
    "SELECT pmod(-7, 3) AS a, pmod(7, -3) AS b, pmod(-7, -3) AS c, pmod(quantity - 3, 2) AS d, "
    "pmod(CAST(-7.5 AS DOUBLE), 2) AS e, pmod(price, -2.0D) AS f FROM events",
    # CAST to an integer cuts a fraction off (DuckDB rounded: 9.99 was 10, -7.5 was -8)
    "SELECT CAST(price AS INT) AS i, CAST(-price AS BIGINT) AS n, int(price * 10) AS t, "
    "CAST(' +12 ' AS INT) AS s, CAST(CAST(-7.5 AS DOUBLE) AS SMALLINT) AS h, "
    "CAST(CAST(12345678901234567.89 AS DECIMAL(20, 2)) AS BIGINT) AS d, "
    "CAST(CAST(NULL AS STRING) AS INT) AS z, bigint(price) AS b, tinyint(quantity) AS ti, "
    "decimal(price) AS dec, try_cast(price AS INT) AS tc FROM events",
    # a lambda's index counts from 0, array_distinct keeps first places and a NULL
    "SELECT id, filter(tags, (x, i) -> i > 0) AS f, transform(tags, (x, i) -> concat(x, i)) AS t, "
    "array_distinct(array('b', 'a', 'b', NULL, 'a', NULL)) AS d, array_distinct(tags) AS dt "
    "FROM tags",
    # Spark's array functions: first places and NULLs kept, 0 for a missing position, NULL for
    # "maybe" (tags holds a NULL array and an empty one)
    "SELECT id, array_intersect(tags, array('b', 'a')) AS i, array_except(tags, array('a')) AS e, "
    "array_union(tags, array('z', 'a')) AS u, array_remove(array('b', NULL, 'a'), 'a') AS r, "
    "array_position(tags, 'zz') AS p, flatten(array(tags, array('x'))) AS f, "
    "array_contains(array('a', NULL), 'b') AS c, array_contains(tags, 'a') AS c2 FROM tags",
    "SELECT array_intersect(array('b', 'a', 'b', NULL), array(NULL, 'b', 'a')) AS i, "
    "array_except(array('b', 'a', 'b', NULL, 'c'), array('a')) AS e, "
    "array_union(array('b', 'a', 'b', NULL), array('c', NULL, 'a')) AS u",
    # skewness and kurtosis of the population, as Spark's (DuckDB's are the sample's)
    "SELECT customer_id, skewness(price) AS s, kurtosis(price) AS k, skewness(quantity) AS sq, "
    "kurtosis(quantity) AS kq FROM events GROUP BY customer_id",
    "SELECT skewness(price) AS s, kurtosis(price) AS k FROM events",
    # round of a DOUBLE: half up on its shortest decimal form, as Spark's (DuckDB's 0.28, 1.0)
    "SELECT round(0.285D, 2) AS a, round(1.005D, 2) AS b, round(-2.675D, 2) AS c, "
    "round(1e20D, 2) AS d, round(12345.675D, -1) AS e, round(price + 0.005D, 2) AS f, "
    "round(avg(price) OVER (PARTITION BY customer_id), 3) AS g FROM events",
    # ... unaliased, inside a division and inside a concatenation (0.5 * 0.57 is 0.285)
    "SELECT round(price * 0.57, 2), round(price * 0.57, 2) / 1 AS c, "
    "concat('r', round(price * 0.57, 2)) AS t FROM events",
    # a DOUBLE or FLOAT as text is Java's: decimals from 0.001 to 1e7, else 1.0E10 (DuckDB's
    # 10000000000.0, 1e-05), cast or concatenated
    "SELECT CAST(price * 1e6D AS STRING) AS a, CAST(price / 1e4D AS STRING) AS b, "
    "concat('p=', price * 1e7D, '/', quantity) AS c, customer_id || (price / 1e9D) AS d, "
    "concat_ws(',', price, 1e-5D, CAST(1e10 AS FLOAT), 0.0009D) AS e, "
    "CAST(CAST(price AS FLOAT) AS STRING) AS f, concat('n', 12345678.9, 1.5) AS g FROM events",
    "SELECT id, CAST(price AS STRING) AS p, concat(text, price) AS c FROM odd",
    # sequence counts down too, by a day between dates, and gives DATEs (DuckDB: empty, times)
    "SELECT sequence(5, 1) AS a, sequence(1, 10, 3) AS b, "
    "sequence(event_date, date_add(event_date, 2)) AS c, "
    "sequence(date_add(event_date, 2), event_date) AS d, "
    "sequence(event_date, add_months(event_date, 2), INTERVAL 1 MONTH) AS e, "
    "size(sequence(quantity, 1)) AS f FROM events",
    # URLs and upper case as Java's: '+' for a space, 'SS' for 'ß' (DuckDB: '%20', 'ẞ')
    "SELECT url_encode(concat(customer_id, ' ~*&/')) AS a, url_decode('a+b%20c%2B') AS b, "
    "try_url_decode('%zz') AS c, upper('Straße') AS d, upper(customer_id) AS e FROM events",
    # regexp_replace's `$1` is a group (DuckDB wrote it as it is); a DATE plus days stays a DATE
    "SELECT regexp_replace(customer_id, '(c)(\\\\d)', '$2-$1') AS a, "
    "regexp_replace(customer_id, 'c', '\\\\$') AS b, "
    "regexp_replace(customer_id, '\\\\d', '<$0>') AS c, "
    "event_date + INTERVAL 1 DAY AS d, event_date - INTERVAL 1 MONTH AS e, "
    "INTERVAL 1 YEAR + event_date AS f, event_date + INTERVAL '2' HOUR AS g FROM events",
    # percentile comes between values (sqlglot's QUANTILE is DuckDB's discrete one: 1, not
    # 1.8), percentile_approx is a value of the column (DuckDB's approx_quantile came between)
    "SELECT percentile(quantity, 0.7) AS a, percentile(price, array(0.25, 0.5)) AS b, "
    "percentile_approx(price, 0.5) AS c, percentile_approx(quantity, array(0.3, 0.75)) AS d "
    "FROM events",
    # a DOUBLE cast to a DECIMAL rounds its shortest form half up (DuckDB's 0.28 for 0.29), a
    # DECIMAL without precision is DECIMAL(10, 0) (DuckDB's (18, 3)); NaN and infinities NULL
    "SELECT CAST(price * 0.57D AS DECIMAL(10, 2)) AS a, CAST(price AS DECIMAL) AS b, "
    "CAST(1.005D AS DECIMAL(10, 2)) AS c FROM events",
    "SELECT id, CAST(price AS DECIMAL(10, 2)) AS d FROM odd",
    # functions DuckDB lacks, written in its SQL: try_ arithmetic NULL past INT's range,
    # try_to_date NULL for February 30, bround half to even (0.285 to 0.28), format_number,
    # reverse of an array, try_sum over a window
    "SELECT try_multiply(quantity, 2147483647) AS a, "
    "try_to_date(concat('2024-02-', 27 + quantity)) AS b, bround(price * 0.57D, 2) AS c, "
    "substring_index(concat(customer_id, '.x.y'), '.', 2) AS d, format_number(price * 1000, 1) "
    "AS e, reverse(split(customer_id, '')) AS f, try_sum(quantity) OVER () AS g, "
    "format_number(quantity * 1000, 0) AS h FROM events",
    # text read into a DATE or TIMESTAMP in Spark's forms only: a year or a year and month is
    # its first day, '2024/06/01' is no date (DuckDB read it), a time may follow the day
    "SELECT CAST(concat('2024-0', quantity) AS DATE) AS a, "
    "try_cast(concat('2024/06/0', quantity) AS DATE) AS b, "
    "to_date(concat(' 2024-06-0', quantity, 'T10:00 ')) AS c, "
    "CAST(concat('2024-06-0', quantity, ' 10:00') AS TIMESTAMP) AS d, "
    "try_to_date(replace(CAST(event_date AS STRING), '-', '/')) AS e, "
    "timestamp(concat('202', quantity)) AS f FROM events",
    # date_part('dow') counts from Sunday 1 (DuckDB's from 0), to_utc_timestamp of a literal
    # reads it in the zone (DuckDB shifted a TIMESTAMPTZ the other way), dayname and monthname
    # are short (DuckDB's Sunday, June)
    "SELECT date_part('dow', event_date) AS a, date_part('DAYOFWEEK', DATE '2024-06-02') AS b, "
    "to_utc_timestamp(TIMESTAMP '2024-06-01 10:00:00', 'America/New_York') AS c, "
    "to_utc_timestamp(event_time, 'Asia/Kolkata') AS d, dayname(event_time) AS e, "
    "monthname(event_date) AS f FROM events",
    # a rewrite that stops the query (a zero divisor, a sum past BIGINT) in a window's ORDER BY
    # or PARTITION BY (DuckDB refuses its volatile error() there)
    "SELECT customer_id, sum(quantity) AS s, rank() OVER (ORDER BY sum(quantity) DESC) AS r, "
    "rank() OVER (PARTITION BY CAST(sum(quantity) AS INT) ORDER BY max(price) / 2) AS p "
    "FROM events GROUP BY customer_id ORDER BY customer_id",
    # to_json leaves a struct's NULL fields out (DuckDB wrote "p":null), a map's in
    "SELECT to_json(named_struct('c', customer_id, 'p', price, 'q', quantity)) AS j, "
    "to_json(map('q', quantity)) AS m FROM events",
    # LATERAL VIEW posexplode gives each element's place from 0 (DuckDB put the element there)
    "SELECT id, p, x FROM tags LATERAL VIEW OUTER posexplode(tags) t AS p, x ORDER BY id, p",
    # a time cast to a number is its epoch seconds, a number cast to a time that many (DuckDB
    # has no such casts)
    "SELECT CAST(event_time AS BIGINT) AS a, CAST(event_time AS DOUBLE) AS b, "
    "CAST(quantity * 86400 AS TIMESTAMP) AS c FROM events",
    # a count below 0 in substr, left and right gives '' (DuckDB counted from the end), and
    # locate from a place below 1 or NULL finds nothing
    "SELECT customer_id, left(customer_id, quantity - 2) AS a, right(customer_id, -1) AS b, "
    "substr(customer_id, 1, quantity - 2) AS c, locate('1', customer_id, quantity - 1) AS d, "
    "locate('c', customer_id, 0) AS e FROM events",
    # a logarithm of 0 or less is NULL (DuckDB: -Infinity, or an error)
    "SELECT ln(0) AS a, ln(-1) AS b, log(2, 0) AS c, log(0, 8) AS d, log10(price - 1) AS e, "
    "CASE WHEN price > 5 THEN 0 ELSE ln(price - 1) END AS f FROM events",
    # LIKE escapes with a backslash; a substring from 0 starts at 1; format_string is printf
    "SELECT customer_id, customer_id LIKE 'c_' AS f, 'a_c' LIKE 'a\\_c' AS a, "
    "'abc' LIKE 'a\\_c' AS b, '5000' LIKE '50\\%' AS d, 'A_c' ILIKE 'a\\_C' AS g FROM events",
    "SELECT substring(customer_id, 0, 1) AS a, substr(customer_id, 0) AS b, "
    "substring(customer_id, quantity - 1, 1) AS c FROM events",
    "SELECT format_string('%06.2f', price) AS a, format_string('%s-%d', customer_id, quantity) "
    "AS b FROM events WHERE quantity IS NOT NULL",
    # a PIVOT cell without rows is NULL, a count's too (DuckDB counted 0)
    "SELECT * FROM (SELECT event_type, source FROM events) "
    "PIVOT (count(*) FOR source IN ('www' AS www, 'app' AS app))",
    "SELECT * FROM (SELECT event_type, source, price, quantity FROM events) PIVOT (count(price) "
    "AS n, count_if(price > 1) AS c, count(price, quantity) AS b, sum(price) AS s "
    "FOR source IN ('www', 'app'))",
    "SELECT * FROM (SELECT event_type, source, price FROM events) "
    "PIVOT (count(price) AS n FOR source IN ('www', 'app'))",
    # day-time intervals print as Spark casts them to text (json failed on Spark's)
    "SELECT event_time - TIMESTAMP '2024-06-01 00:00:00' AS t, INTERVAL 90 MINUTES AS i, "
    "TIMESTAMP '2024-05-30 00:00:00.5' - event_time AS n FROM events",
    # dates as Spark has them: trunc is a DATE, Spark's unit names, months_between with the time
    # of day, weekday from Monday 0, the second's fraction kept
    "SELECT trunc(event_date, 'MM') AS a, trunc(event_date, 'week') AS b, trunc(event_date, 'YY') "
    "AS c, date_trunc('DD', event_time) AS d, date_from_unix_date(19875) AS e FROM events",
    "SELECT months_between(event_time, TIMESTAMP '2024-01-01 12:00:00', false) AS a, "
    "months_between(event_time, TIMESTAMP '2024-01-01 12:00:00') AS b, "
    "months_between(DATE '2024-02-29', DATE '2024-01-31') AS c, weekday(event_date) AS w, "
    "extract(SECOND FROM event_time) AS s, date_part('SECOND', event_time) AS p FROM events",
    # a negative literal is a DECIMAL as a positive one is (DuckDB rounded it as a DOUBLE)
    "SELECT round(-2.5) AS a, round(-2.4) AS b, round(2.5) AS c, round(-2.55, 1) AS d, "
    "bround(-2.5) AS e, round(-x) AS f FROM VALUES (2.5D) AS t(x)",
    # whole units from start to end, cut toward zero (DuckDB's date_diff counts boundaries, and
    # sqlglot read a three-argument datediff as days between DATEs)
    "SELECT timestampdiff(HOUR, a, b) AS h, datediff(DAY, a, b) AS d, date_diff(MINUTE, a, b) "
    "AS mi, timestampdiff(MONTH, a, b) AS mo, timestampdiff(QUARTER, a, b) AS q, "
    "timestampdiff(YEAR, a, b) AS y, timestampdiff(WEEK, a, b) AS w, "
    "timestampdiff(MILLISECOND, a, b) AS ms, timestampadd(MONTH, 1, a) AS later FROM VALUES "
    "(TIMESTAMP '2024-01-31 10:59:00', TIMESTAMP '2024-02-29 11:01:00'), "
    "(TIMESTAMP '2024-01-31 10:59:00', TIMESTAMP '2024-03-31 10:58:59.999'), "
    "(TIMESTAMP '2024-03-31 23:00:00', TIMESTAMP '2023-02-28 23:30:00'), "
    "(TIMESTAMP '2024-05-01 00:00:00', TIMESTAMP '2024-04-30 23:59:59.9995'), "
    "(TIMESTAMP '2020-02-29 12:00:00', TIMESTAMP '2024-02-28 12:00:00'), "
    "(NULL, TIMESTAMP '2024-01-01 00:00:00') AS t(a, b)",
    "SELECT timestampdiff(SECOND, event_time, TIMESTAMP '2024-06-01 00:00:00') AS s, "
    "datediff(event_date, DATE '2024-05-01') AS days FROM events",
    # a DATE minus a DATE is an interval of days (DuckDB's a number), a DATE minus 1 a DATE
    "SELECT event_date - DATE '2024-05-01' AS a, event_date - 1 AS b, quantity - 1 AS c, "
    "max(event_date) OVER () - event_date AS d FROM events",
    # JSON that does not parse, as a quarantined line: NULL (DuckDB stopped); a VARIANT prints
    # as its JSON text (Spark's printed its binary encoding, and a NULL one failed)
    "SELECT get_json_object(t, '$.a') AS g, json_object_keys(t) AS k, json_array_length(t) AS n, "
    "try_parse_json(t) AS v, parse_json('[1, {\"b\": 2.50}]') AS p "
    "FROM VALUES ('{\"a\":1'), ('{\"a\":{\"b\":1}}'), ('[1,2]'), (NULL) AS j(t)",
    # three-valued: NULL where the lambda is NULL for an element and true for none
    "SELECT exists(a, x -> x > 1) AS e, forall(a, x -> x > 1) AS f FROM VALUES (array(1, 2)), "
    "(array(1, NULL)), (array(3, NULL)), (array(2, 3)), (CAST(NULL AS ARRAY<INT>)) AS l(a)",
    # `every`, `some` and `any` are bool_and and bool_or (DuckDB had no `every`, sqlglot read
    # the others as quantifiers); to_char of a time is date_format (it was not translated)
    "SELECT customer_id, every(logged_out) AS e, some(price > 5) AS s, any(source = 'app') AS a, "
    "to_char(max(event_time), 'dd/MM/yyyy HH:mm') AS t, to_varchar(min(event_date), 'yyyy') "
    "AS d FROM events GROUP BY customer_id",
    # a tumbling window from the epoch moved on by a start time, and its last microsecond
    "SELECT w, window_time(w) AS t FROM (SELECT window(event_time, '1 hour', '60 minutes', "
    "'15 minutes') AS w FROM events)",
    # sessions per key, as Spark merges them: windows that touch are one, a row without a
    # time is in none; by place and unaliased too
    "SELECT k, session_window(t, '5 minutes') AS w, count(*) AS n FROM VALUES "
    "('a', TIMESTAMP '2024-01-01 10:00:00'), ('a', TIMESTAMP '2024-01-01 10:05:00'), "
    "('a', TIMESTAMP '2024-01-01 10:10:01'), ('b', TIMESTAMP '2024-01-01 10:00:00'), "
    "('b', NULL), ('a', TIMESTAMP '2024-01-01 10:04:59') AS v(k, t) "
    "GROUP BY k, session_window(t, '5 minutes')",
    "SELECT customer_id, session_window(event_time, '2 hours'), count(*), sum(price) AS spent "
    "FROM events WHERE event_type <> 'x' GROUP BY 1, 2",
    # maps print as JSON objects; Spark's NULL type inside an array or map (`map()`,
    # `array_repeat(NULL, 2)`) failed in pyspark's Arrow conversion
    "SELECT map('q', quantity, 'p', NULL) AS m, map(event_date, price) AS k, map() AS e, "
    "array_repeat(NULL, 2) AS a, named_struct('n', NULL, 'm', map()) AS s FROM events",
    # Spark's other query forms: TABLE, inline tables named col1.., pipe syntax (a LIMIT after
    # a query without one failed in sqlglot), table names in any case, comments in no name
    "TABLE carts ORDER BY customer_id",
    "VALUES (1, 'a'), (2, 'b') ORDER BY 1 DESC",
    "SELECT * FROM VALUES (1, 2), (3, 4) AS v",
    "SELECT count(*) FROM EVENTS",
    "SELECT sum(price) /* total */, 1 -- one\nFROM events",
    "FROM events |> AGGREGATE count(*), sum(price) GROUP BY event_type",
    "SELECT customer_id FROM events |> ORDER BY customer_id |> LIMIT 2",
    "TABLE events |> WHERE quantity > 1 |> AGGREGATE count(*)",
    # the grouped window by its name, as Spark names its column (DuckDB knew no table window)
    "SELECT window.start, window.end, count(*) AS n FROM events "
    "GROUP BY window(event_time, '1 hour')",
    "SELECT window, count(*) FROM events GROUP BY window(event_time, '30 minutes')",
    "SELECT customer_id, session_window.start AS s, count(*) AS n FROM events "
    "GROUP BY customer_id, session_window(event_time, '5 minutes')",
]


@pytest.mark.parametrize("sql", QUERIES)
def test_same_rows_on_both_engines(spark, lake, sql):
    duck = printed(run_duckdb(sql, lake))
    spk = printed(run_query(spark, sql, lake))
    if " ORDER BY " not in sql:
        duck.sort(key=lambda r: json.dumps(r, sort_keys=True))
        spk.sort(key=lambda r: json.dumps(r, sort_keys=True))
    assert duck == spk


# Unaliased outputs get Spark's names on DuckDB too, for these common forms.
def test_unaliased_names_match_spark(spark, lake):
    sql = "SELECT count(*), sum(quantity), max(price), hour(event_time), price * 2 FROM events "
    sql += "GROUP BY hour(event_time), price * 2"
    assert run_duckdb(sql, lake).column_names == run_query(spark, sql, lake).column_names


def test_time_travel_on_both_engines(spark, lake):
    sql = "SELECT customer_id, total_items FROM carts ORDER BY customer_id"
    first = Snapshot(version=1)
    assert printed(run_duckdb(sql, lake, first)) == printed(run_query(spark, sql, lake, first))
    assert [r["customer_id"] for r in printed(run_duckdb(sql, lake, first))] == ["c1", "c2"]
    missing = r"^query: table 'carts' has versions 0 to \d+, not --version 99$"
    # As Delta's own timestampAsOf: a time before the table was made is no version of it.
    before = r"^query: table 'carts' did not exist yet at --as-of 2000-01-01 00:00:00.000 UTC: "
    for run in (run_duckdb, lambda *a: run_query(spark, *a)):
        with pytest.raises(UserError, match=missing):
            run(sql, lake, Snapshot(version=99))
        with pytest.raises(UserError, match=before):
            run(sql, lake, Snapshot.parse(None, "2000-01-01"))


def test_a_zero_divisor_stops_the_query_on_both_engines(spark, lake):
    emptied = Snapshot(version=1)  # c2's cart is empty: total_items 0
    for op, duckdb_says, spark_says in [
        ("/", "division by zero (try_divide", "[DIVIDE_BY_ZERO] Division by zero"),
        ("div", "division by zero (try_divide", "[DIVIDE_BY_ZERO] Division by zero"),
        ("%", "remainder by zero (try_mod", "[REMAINDER_BY_ZERO] Remainder by zero"),
        ("pmod", "remainder by zero (try_mod", "[REMAINDER_BY_ZERO] Remainder by zero"),
    ]:
        x = f"{op}(total_items, total_items)" if op == "pmod" else f"total_items {op} total_items"
        sql = f"SELECT customer_id, {x} AS x FROM carts"
        with pytest.raises(UserError) as on_duckdb:
            run_duckdb(sql, lake, emptied)
        assert str(on_duckdb.value).startswith("query: DuckDB: "), str(on_duckdb.value)
        assert str(on_duckdb.value).endswith(f"{duckdb_says}(a, b) gives NULL instead)")
        with pytest.raises(UserError, match=rf"^query: {re.escape(spark_says)}"):
            run_query(spark, sql, lake, emptied)
    # NULL where Spark gives it: try_divide, try_mod, and a NULL dividend whatever the divisor.
    sql = (
        "SELECT customer_id, try_divide(total_price, total_items) AS avg_price, "
        "try_mod(total_price, total_items) AS rest, "
        "CAST(NULL AS DOUBLE) / total_items AS none FROM carts ORDER BY customer_id"
    )
    on_duckdb = printed(run_duckdb(sql, lake, emptied))
    assert on_duckdb == printed(run_query(spark, sql, lake, emptied))
    assert on_duckdb == [
        {"customer_id": "c1", "avg_price": 5.245, "rest": 0.49, "none": None},
        {"customer_id": "c2", "avg_price": None, "rest": None, "none": None},
    ]


@pytest.mark.parametrize("text", ["7.9", "1e3", "0x1A", "c1"])
def test_text_that_is_no_whole_number_stops_a_cast_to_int_on_both_engines(spark, lake, text):
    # sqlglot's TRY_CAST gave NULL, and DuckDB's CAST reads '7.9' as 8, '1e3' as 1000.
    sql = f"SELECT CAST('{text}' AS INT) AS x FROM carts"
    with pytest.raises(UserError) as on_duckdb:
        run_duckdb(sql, lake)
    assert str(on_duckdb.value) == (
        f"query: DuckDB: Invalid Input Error: the value '{text}' cannot be cast to INT because "
        "it is malformed (try_cast gives NULL instead)"
    )
    with pytest.raises(UserError, match=rf"^query: \[CAST_INVALID_INPUT\] The value '{text}'"):
        run_query(spark, sql, lake)
    sql = f"SELECT try_cast('{text}' AS INT) AS x FROM carts"
    assert printed(run_duckdb(sql, lake)) == printed(run_query(spark, sql, lake))


@pytest.mark.parametrize(
    ("call", "duckdb_says", "spark_says"),
    [
        (
            "sequence(1, quantity, -1)",
            "Illegal sequence boundaries: 1 to 3 by -1",
            "Illegal sequence",
        ),
        (
            "url_decode(concat(customer_id, '%zz'))",
            "cannot be decoded: c2%zz",
            "[CANNOT_DECODE_URL]",
        ),
        # DuckDB gave NULL for an index past the end
        (
            "split(customer_id, '-')[1]",
            "the array has 1 elements (get(a, i) gives NULL instead)",
            "[INVALID_ARRAY_INDEX]",
        ),
        (
            "element_at(array(customer_id), 2)",
            "elements (try_element_at(a, i) gives NULL instead)",
            "[INVALID_ARRAY_INDEX_IN_ELEMENT_AT]",
        ),
    ],
)
def test_sequences_urls_and_indexes_stop_on_both_engines(
    spark, lake, call, duckdb_says, spark_says
):
    # DuckDB gave an empty sequence, the URL as it was, and NULL past an array's end.
    sql = f"SELECT {call} AS x FROM events WHERE customer_id = 'c2' AND quantity = 3"
    with pytest.raises(UserError) as on_duckdb:
        run_duckdb(sql, lake)
    assert str(on_duckdb.value).endswith(duckdb_says), str(on_duckdb.value)
    with pytest.raises(UserError, match=re.escape(spark_says)):
        run_query(spark, sql, lake)


def test_an_index_past_the_end_stops_when_grouped_by_its_place(spark, lake):
    # DuckDB gave a NULL group: the types of `GROUP BY 1`'s expression were not found, so the
    # index was left as DuckDB's.
    sql = (
        "SELECT split(customer_id, '-')[1] AS x, count(*) AS n FROM events "
        "WHERE customer_id = 'c2' GROUP BY 1"
    )
    with pytest.raises(UserError, match=re.escape("(get(a, i) gives NULL instead)")):
        run_duckdb(sql, lake)
    with pytest.raises(UserError, match=re.escape("[INVALID_ARRAY_INDEX]")):
        run_query(spark, sql, lake)


def test_a_sum_past_bigint_stops_on_both_engines(spark, lake):
    # DuckDB sums integers as HUGEINTs: it gave 55340232221128654830 where Spark stops.
    sql = "SELECT sum(9223372036854775807L) AS x FROM events"
    with pytest.raises(UserError) as on_duckdb:
        run_duckdb(sql, lake)
    assert str(on_duckdb.value) == (
        "query: DuckDB: Invalid Input Error: the sum is past BIGINT's range "
        "(try_sum gives NULL instead)"
    )
    with pytest.raises(UserError, match=re.escape("[ARITHMETIC_OVERFLOW]")):
        run_query(spark, sql, lake)
    sql = "SELECT try_sum(9223372036854775807L) AS x, sum(quantity) AS y FROM events"
    assert printed(run_duckdb(sql, lake)) == printed(run_query(spark, sql, lake))
    assert printed(run_duckdb(sql, lake)) == [{"x": None, "y": 8}]


def test_delta_spark_errors_are_one_line(spark, lake):
    # pyspark cannot build the message of delta-spark's own error classes and raised instead.
    with pytest.raises(PySparkException) as caught:
        spark.read.format("delta").option("versionAsOf", 99).load(str(lake / "carts"))
    assert spark_error_line(caught.value).startswith(
        "[DELTA_VERSION_NOT_FOUND] Cannot time travel Delta table to version 99."
    )


def test_spark_leaves_variable_references_as_text(spark, lake):
    before = spark.conf.get(SUBSTITUTE)
    sql = "SELECT '${env:HOME}' AS h, '${system:user.name}' AS u"
    assert printed(run_query(spark, sql, lake)) == [
        {"h": "${env:HOME}", "u": "${system:user.name}"}
    ]
    assert spark.conf.get(SUBSTITUTE) == before  # the shared session is left as it was


def test_spark_explains_a_query_over_the_lake_tables(spark, lake):
    sql = "EXPLAIN FORMATTED SELECT count(*) FROM events WHERE event_date = DATE'2024-06-01'"
    plan = run_query(spark, sql, lake).column("plan").to_pylist()
    assert len(plan) == 1
    # The lake's table by its path, its partitions pruned.
    lines = plan[0].splitlines()
    assert any("Location: PreparedDeltaFileIndex" in ln and "/events" in ln for ln in lines)
    assert any(ln.startswith("PartitionFilters: ") and "event_date" in ln for ln in lines)


def test_spark_refuses_escapes_before_running_them(spark, lake, tmp_path):
    made = tmp_path / "made"
    for sql in (
        f"SELECT reflect('org.apache.hadoop.fs.FileUtil', 'symLink', '/etc/passwd', '{made}')",
        "SELECT reflect('java.io.File', 'createTempFile', 'x', '.tmp')",
        "SELECT java_method('java.lang.System', 'getenv', 'HOME')",
        "SELECT current_user()",
        "SELECT TRANSFORM(customer_id) USING 'touch made' AS (c) FROM events",
    ):
        with pytest.raises(UserError, match=r"^query: .*(not allowed|plain name)"):
            run_query(spark, sql, lake)
    assert list(tmp_path.iterdir()) == []


def test_function_list_covers_spark(spark):
    # engine/definitions/spark_functions.txt classifies every Spark built-in: a new Spark
    # version with new functions fails here until each is allowed or refused with a reason.
    names = {r[0] for r in spark.sql("SHOW SYSTEM FUNCTIONS").collect()}
    words = {n.lower() for n in names if n.replace("_", "a").isalnum()}
    listed = set(allowed_functions()) | set(refused_functions())
    assert words - listed == set()
    # Clauses and syntax Spark reads as calls, not functions it lists.
    assert listed - words <= {"identifier", "timestampadd", "timestampdiff"}


def query_on_spark(lake: Path, cwd: Path, sql: str, *options: str) -> str:
    """What `runner.py query SQL --engine spark` prints, run from `cwd`; it must exit 0."""
    args = ["query", sql, "--lake", str(lake), "--engine", "spark", *options]
    result = subprocess.run(
        [sys.executable, str(PROJECT / "runner.py"), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def files_of(folder: Path) -> dict[str, tuple[int, int]]:
    """Every file below `folder` with its size and modification time."""
    return {
        str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in folder.rglob("*")
        if p.is_file()
    }


def test_cli_spark_prints_odd_values_as_json_and_variables_as_text(lake, tmp_path):
    sql = "SELECT id, text, price, '${env:HOME}' AS h FROM odd ORDER BY id"
    before = files_of(lake)
    substitute = "spark.sql.variable.substitute=true"  # --conf does not turn substitution on
    out = query_on_spark(lake, tmp_path, sql, "--format", "json", "--conf", substitute)
    assert list(tmp_path.iterdir()) == []  # read-only: not even a spark-warehouse/ here
    assert files_of(lake) == before  # nor Spark's log in <lake>/_logs

    def refuse(token: str) -> Any:
        raise ValueError(f"not JSON: {token}")

    rows = json.loads(out, parse_constant=refuse)
    assert [(r["text"], r["price"], r["h"]) for r in rows] == [
        ("ok", 1.5, "${env:HOME}"),
        ("caf\\xe9", "NaN", "${env:HOME}"),
        (None, "Infinity", "${env:HOME}"),
        ("\\xff\\xfeA", "-Infinity", "${env:HOME}"),
        ("Zürich", None, "${env:HOME}"),
    ]


def test_cli_prints_spark_plan_as_spark_does(lake, tmp_path):
    sql = "EXPLAIN SELECT event_type, count(*) FROM events GROUP BY event_type"
    out = query_on_spark(lake, tmp_path, sql)
    assert out.startswith("== Physical Plan ==\n")  # not a table of one cell
    assert "HashAggregate(keys=[event_type" in out
    assert re.search(r"hashpartitioning\(event_type#\d+, 2\)", out)  # the query's default
    # A Spark setting of the user's reaches the session, over the query's own default.
    out = query_on_spark(lake, tmp_path, sql, "--conf", "spark.sql.shuffle.partitions=7")
    assert re.search(r"hashpartitioning\(event_type#\d+, 7\)", out)


def test_times_far_from_today_written_by_spark(spark, tmp_path):
    # delta-spark stores TIMESTAMP as Parquet INT96, which Arrow read as nanoseconds: a time
    # outside 1677..2262 failed every query of the table on DuckDB (and its quality check).
    lake = tmp_path / "lake"
    times = ["0001-01-01 00:00:00", "1500-06-01 12:00:00", "9999-12-31 23:59:59.999999"]
    rows = spark.sql(
        "SELECT id, CAST(t AS TIMESTAMP) AS t FROM VALUES "
        + ", ".join(f"({i}, '{t}')" for i, t in enumerate(times))
        + " AS v(id, t)"
    )
    rows.write.format("delta").save(str(lake / "far"))
    sql = "SELECT id, t, year(t) AS y FROM far ORDER BY id"
    expected = [
        {"id": 0, "t": "0001-01-01T00:00:00+00:00", "y": 1},
        {"id": 1, "t": "1500-06-01T12:00:00+00:00", "y": 1500},
        {"id": 2, "t": "9999-12-31T23:59:59.999999+00:00", "y": 9999},
    ]
    assert printed(run_duckdb(sql, lake)) == expected
    assert printed(run_query(spark, sql, lake)) == expected


def test_decimals_print_every_digit_on_both_engines(spark, lake):
    # A decimal past a float's 16 digits printed as 1.2345678901234568e+16.
    sql = (
        "SELECT CAST('12345678901234567.89' AS DECIMAL(20,2)) AS d, 0.1 + 0.2 AS s, "
        "array(CAST(-0.000001 AS DECIMAL(10,6))) AS a, "
        "sum(CAST(price AS DECIMAL(20,2))) + 100000000000000000 AS total FROM events"
    )
    for run in (run_duckdb, lambda *a: run_query(spark, *a)):
        result = run(sql, lake)
        json_out, table_out = io.StringIO(), io.StringIO()
        print_rows(result, "json", json_out)
        print_rows(result, "table", table_out)
        assert json_out.getvalue() == (
            '[{"d": 12345678901234567.89, "s": 0.3, "a": [-0.000001], '
            '"total": 100000000000000141.73}]\n'
        )
        assert "| 12345678901234567.89 | 0.3 | [-0.000001] | 100000000000000141.73 |" in (
            table_out.getvalue()
        )


def test_json_refuses_two_columns_of_one_name(spark, lake):
    # A JSON object keeps one value per name: the two columns printed as one.
    sql = (
        "SELECT e.customer_id, c.customer_id FROM events e "
        "JOIN carts c ON e.customer_id = c.customer_id"
    )
    for run in (run_duckdb, lambda *a: run_query(spark, *a)):
        result = run(sql, lake)
        with pytest.raises(UserError) as caught:
            print_rows(result, "json", io.StringIO())
        assert str(caught.value) == (
            "query: --format json: more than one column is named customer_id; give each its "
            "own name with AS"
        )
        print_rows(result, "table", io.StringIO())  # a table shows both


def test_floats_print_as_written(spark, tmp_path):
    # A FLOAT column's 0.1 printed as 0.10000000149011612 (its bits read as a double).
    lake = tmp_path / "lake"
    rows = spark.sql(
        "SELECT CAST(f AS FLOAT) AS f FROM VALUES ('0.1'), ('0.3'), ('1e38'), (NULL), ('NaN') "
        "AS v(f)"
    )
    rows.write.format("delta").save(str(lake / "ratios"))
    sql = "SELECT f, array(f) AS a FROM ratios ORDER BY f NULLS FIRST"
    for run in (run_duckdb, lambda *a: run_query(spark, *a)):
        out = io.StringIO()
        print_rows(run(sql, lake), "json", out)
        assert json.loads(out.getvalue()) == [
            {"f": None, "a": [None]},
            {"f": 0.1, "a": [0.1]},
            {"f": 0.3, "a": [0.3]},
            {"f": 1e38, "a": [1e38]},
            {"f": "NaN", "a": ["NaN"]},
        ]
