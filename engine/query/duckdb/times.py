"""Times and dates as Spark computes them, where sqlglot's DuckDB SQL differs.

* `window(ts, '5 minutes')` (tumbling) is a struct of DuckDB `time_bucket` start and end,
  aligned to the epoch as Spark does (moved on by a start time, the fourth argument);
  `window_time(w)` is its last microsecond; sliding windows (a slide shorter than the window)
  are refused;
* `unix_timestamp(ts)` of a timestamp column gives whole epoch seconds;
* `from_utc_timestamp(ts, tz)` and `to_utc_timestamp(ts, tz)` shift the way Spark's do (sqlglot's
  `AT TIME ZONE` shifts a UTC time away from tz instead, and gives a time without a zone);
* `dayofweek(d)` and `extract(DOW FROM d)` count from 1 (Sunday), `weekday(d)` from 0 (Monday);
  `dayname` and `monthname` are short (`Sun`, `Jun`; DuckDB's `Sunday`, `June`);
* `to_char(ts, pattern)` and `to_varchar` of a date or time are `date_format`;
* date patterns are read as Spark reads them (quotes, `DDD`, `LLL`, `SSS` fractions of a
  second as DuckDB's `%g`); a field DuckDB has no code for (`k`, `Q`, `w`, `YYYY`, zones) is
  refused (sqlglot left its letters, which DuckDB printed as they are);
* `date_add`, `date_sub`, `add_months`, `trunc(d, unit)` and `date_from_unix_date` are DATEs
  (DuckDB's are TIMESTAMPs), and Spark's unit names (`MM`, `YY`, `DD`) are understood;
* `months_between` counts the time of day, `extract(SECOND ...)` and `date_part('second', ...)`
  keep the fraction; a DATE minus a DATE is an interval of days (DuckDB's a number), and a DATE
  plus or minus an interval of days, months or years is a DATE (DuckDB's a TIMESTAMP);
* `timestamp_seconds`, `timestamp_millis` and `timestamp_micros` (DuckDB has none) are
  written in its SQL, and `unix_seconds` rounds down;
* `timestampdiff(unit, a, b)` (also spelt `datediff` or `date_diff` with a unit) counts whole
  units, cut toward zero, as java.time does (DuckDB's `date_diff` counts the boundaries
  crossed, and sqlglot read the three-argument `datediff` as days between DATEs);
* `to_date` stops at text it cannot read, as Spark's does (sqlglot's gives NULL), and
  `try_to_date` (DuckDB has none) gives NULL there.
"""

from __future__ import annotations

import re

import sqlglot
from sqlglot import exp

from engine.definitions.durations import Duration, parse_duration
from engine.errors import UserError
from engine.query.dialect import SparkQuery
from engine.query.duckdb.inferred import TIMES, operand_type
from engine.query.duckdb.sql import SPARK_HINT, duckdb_expr, is_duckdb_own

__all__ = [
    "count_days_like_spark",
    "dates_like_spark",
    "dates_plus_days",
    "dates_subtracted",
    "epochs",
    "formats",
    "time_texts",
    "timestamp_diffs",
    "to_dates",
    "try_to_dates",
    "unix_seconds",
    "windows",
    "zones",
]

_EPOCH = "TIMESTAMPTZ '1970-01-01 00:00:00+00'"
# The format sqlglot fills in for Spark's one-argument unix_timestamp(x).
_DEFAULT_UNIX_FORMAT = sqlglot.parse_one("unix_timestamp(x)", read=SparkQuery).args["format"]


def _duration(arg: exp.Expr, what: str) -> Duration:
    try:
        if not (isinstance(arg, exp.Literal) and arg.is_string):
            raise ValueError("not a string literal")
        return parse_duration(arg.name)
    except ValueError:
        raise UserError(
            f"query: window(): {what} must be a literal like '5 minutes', got "
            f"{arg.sql(dialect='spark')} ({SPARK_HINT})"
        ) from None


def _window(call: exp.Anonymous) -> exp.Expr:
    """Spark's tumbling `window(ts, duration[, same slide[, start time]])` as a struct(start,
    end) of time buckets, from the epoch moved on by the start time."""
    args = call.expressions
    written = call.sql(dialect="spark")
    if len(args) not in (2, 3, 4):
        raise UserError(
            f"query: {written}: the DuckDB engine knows window(ts, duration[, same slide[, "
            f"start time]]) only ({SPARK_HINT})"
        )
    size = _duration(args[1], "the duration")
    if len(args) >= 3 and _duration(args[2], "the slide").micros != size.micros:
        raise UserError(
            f"query: {written}: sliding windows are not supported by the DuckDB engine "
            f"({SPARK_HINT})"
        )
    origin = _EPOCH
    if len(args) == 4:
        offset = _duration(args[3], "the start time")
        if offset.micros >= size.micros:
            raise UserError(f"query: {written}: the start time must be less than the slide")
        origin = f"{_EPOCH} + {offset.interval_sql()}"
    start = f"time_bucket({size.interval_sql()}, CAST(__0 AS TIMESTAMPTZ), {origin})"
    end = f"{start} + {size.interval_sql()}"
    return duckdb_expr(f'struct_pack(start := {start}, "end" := {end})', args[0])


def windows(tree: exp.Expr) -> None:
    """Tumbling `window()`s as time buckets; `window_time(w)`, the last microsecond of `w`."""
    for call in list(tree.find_all(exp.Anonymous)):
        if call.name.lower() == "window":
            call.replace(_window(call))
    for call in list(tree.find_all(exp.Anonymous)):
        if call.name.lower() == "window_time" and len(call.expressions) == 1:
            last = "struct_extract(__0, 'end') - INTERVAL 1 MICROSECOND"
            call.replace(duckdb_expr(last, call.expressions[0]))


def unix_seconds(tree: exp.Expr) -> None:
    """`unix_timestamp(ts)` and `to_unix_timestamp(ts)` as whole epoch seconds (sqlglot gives
    the first Spark's default pattern and the second none)."""
    for to_unix in list(tree.find_all(exp.StrToUnix)):
        pattern = to_unix.args.get("format")
        if to_unix.this is not None and (pattern is None or pattern == _DEFAULT_UNIX_FORMAT):
            seconds = "CAST(FLOOR(epoch(CAST(__0 AS TIMESTAMPTZ))) AS BIGINT)"
            to_unix.replace(duckdb_expr(seconds, to_unix.this))


def _shift_zone(node: exp.AtTimeZone | exp.FromTimeZone) -> exp.Expr:
    """Spark's from_utc_timestamp (parsed as AtTimeZone) and to_utc_timestamp (FromTimeZone)
    in DuckDB, whose session is in UTC. sqlglot's argument is the time as a TIMESTAMP: its UTC
    wall clock."""
    operands = (node.this, node.args["zone"])
    if isinstance(node, exp.AtTimeZone):  # the UTC time's wall clock in zone, as a UTC time
        shifted = "CAST(CAST(__0 AS TIMESTAMPTZ) AT TIME ZONE __1 AS TIMESTAMPTZ)"
        return duckdb_expr(shifted, *operands)
    # the UTC wall clock read in zone: a TIMESTAMPTZ (a literal) would be shifted the other way
    return duckdb_expr("CAST(__0 AS TIMESTAMP) AT TIME ZONE __1", *operands)


# Spark's functions of epoch seconds, milliseconds and microseconds that DuckDB lacks, by name.
_FROM_EPOCH = {
    "timestamp_seconds": "to_timestamp(__0)",
    "timestamp_millis": "epoch_ms(CAST(__0 AS BIGINT))",
    "timestamp_micros": "make_timestamp(CAST(__0 AS BIGINT))",
}


def epochs(tree: exp.Expr) -> None:
    """timestamp_seconds, timestamp_millis and timestamp_micros (DuckDB has none), and
    unix_seconds rounded down, as Spark's (sqlglot's cast of DuckDB's epoch rounded 0.5 up)."""
    for call in reversed(list(tree.find_all(exp.Anonymous))):  # innermost first
        template = _FROM_EPOCH.get(call.name.lower())
        if template and len(call.expressions) == 1:
            call.replace(duckdb_expr(template, call.expressions[0]))
    for seconds in reversed(list(tree.find_all(exp.UnixSeconds))):
        seconds.replace(duckdb_expr("CAST(floor(epoch(__0)) AS BIGINT)", seconds.this))


def zones(tree: exp.Expr) -> None:
    """from_utc_timestamp and to_utc_timestamp as Spark shifts."""
    for shift in reversed(list(tree.find_all(exp.AtTimeZone, exp.FromTimeZone))):
        shift.replace(_shift_zone(shift))  # innermost first: an outer one copies its operand


# Spark's pattern letters, by how many there are in a row, as DuckDB's codes: a fraction of a
# second has one S per digit, DuckDB formats milliseconds, microseconds and nanoseconds.
_CODES: dict[str, dict[int, str]] = {
    "y": {1: "%Y", 2: "%y", 3: "%Y", 4: "%Y"},
    "M": {1: "%-m", 2: "%m", 3: "%b", 4: "%B"},
    "L": {1: "%-m", 2: "%m", 3: "%b", 4: "%B"},
    "d": {1: "%-d", 2: "%d"},
    "D": {1: "%-j", 3: "%j"},
    "E": {1: "%a", 2: "%a", 3: "%a", 4: "%A"},
    "a": {1: "%p"},
    "h": {1: "%-I", 2: "%I"},
    "H": {1: "%-H", 2: "%H"},
    "m": {1: "%-M", 2: "%M"},
    "s": {1: "%-S", 2: "%S"},
    "S": {3: "%g", 6: "%f", 9: "%n"},
}
# A quoted text ('' is a quote), a run of one letter, or any other character.
_PATTERN_PART = re.compile(r"'(?:[^']|'')*'|([A-Za-z])\1*|.", re.DOTALL)
_FORMATTED = (exp.TimeToStr, exp.StrToTime, exp.TsOrDsToDate, exp.StrToUnix, exp.UnixToStr)


def _duckdb_format(pattern: str) -> str:
    """Spark's date pattern as DuckDB's format; a field DuckDB has no code for is refused."""

    def part(found: re.Match[str]) -> str:
        run, letter = found.group(), found.group(1)
        if letter is None and run.startswith("'"):
            text = run[1:-1].replace("''", "'") if len(run) > 2 else "'"
            return text.replace("%", "%%")
        code = _CODES.get(letter or "", {}).get(len(run))
        if code is None and (letter is not None or run in "[]{}#"):
            raise UserError(
                f"query: date format {pattern!r}: the DuckDB engine has no {run!r} ({SPARK_HINT})"
            )
        return code or run.replace("%", "%%")

    return _PATTERN_PART.sub(part, pattern)


def _literal_text(node: exp.Expr) -> str | None:
    """The text of a string literal, or of string literals side by side (Spark joins them)."""
    if isinstance(node, exp.Literal) and node.is_string:
        return node.name
    if isinstance(node, exp.Concat) and not node.args.get("coalesce"):
        parts = [_literal_text(e) for e in node.expressions]
        return None if None in parts else "".join(p for p in parts if p is not None)
    return None


def time_texts(tree: exp.Expr) -> None:
    """`to_char(ts, pattern)` and `to_varchar` of a date or time are Spark's `date_format`
    (sqlglot's DuckDB SQL has no pattern for TO_CHAR); of a number, or a value sqlglot cannot
    type, they are left (DuckDB's error, with the hint)."""
    for call in list(tree.find_all(exp.ToChar, exp.Anonymous)):
        if isinstance(call, exp.ToChar):
            value, pattern, kind = call.this, call.args.get("format"), operand_type(call, "this")
        elif call.name.lower() == "to_varchar" and len(call.expressions) == 2:
            (value, pattern), kind = call.expressions, operand_type(call, "expressions")
        else:
            continue
        if pattern is not None and kind in TIMES:
            call.replace(exp.TimeToStr(this=value, format=pattern))


def formats(tree: exp.Expr) -> None:
    """Spark's date patterns (kept as written by `SparkQuery`) as DuckDB's formats; one that is
    no literal is refused, as it cannot be translated."""
    for formatted in list(tree.find_all(*_FORMATTED)):
        fmt = formatted.args.get("format")
        if fmt is None or is_duckdb_own(formatted):  # a rewrite's own is DuckDB's already
            continue
        pattern = _literal_text(fmt)
        if pattern is None:
            raise UserError(
                f"query: date format {fmt.sql(dialect='spark')}: the DuckDB engine reads a "
                f"pattern written in the query only ({SPARK_HINT})"
            )
        fmt.replace(exp.Literal.string(_duckdb_format(pattern)))


_DAY_OF_WEEK = ("DOW", "DAYOFWEEK")


def count_days_like_spark(tree: exp.Expr) -> None:
    """`dayofweek`, `extract(DOW ...)` and `date_part('dow', ...)` from 1 (Sunday), `weekday`
    from 0 (Monday); `dayname` and `monthname` short, as Spark's (DuckDB's are whole)."""
    for part in list(tree.find_all(exp.Anonymous)):  # date_part is Spark's extract
        if part.name.lower() == "date_part" and len(part.expressions) == 2:
            unit, day = part.expressions
            if unit.is_string and unit.name.upper() in _DAY_OF_WEEK:
                part.replace(exp.Extract(this=exp.var(unit.name.upper()), expression=day))
    for day in list(tree.find_all(exp.DayOfWeek, exp.Extract)):
        if isinstance(day, exp.Extract) and day.name.upper() not in _DAY_OF_WEEK:
            continue
        day.replace(exp.Paren(this=exp.Add(this=day.copy(), expression=exp.Literal.number(1))))
    for call in list(tree.find_all(exp.Anonymous)):
        if call.name.lower() == "weekday" and len(call.expressions) == 1:
            call.replace(duckdb_expr("(isodow(CAST(__0 AS DATE)) - 1)", call.expressions[0]))
    for name in reversed(list(tree.find_all(exp.Dayname, exp.Monthname))):  # innermost first
        short = "%a" if isinstance(name, exp.Dayname) else "%b"  # Spark's 'Sun', 'Jun'
        name.replace(duckdb_expr(f"strftime(CAST(__0 AS DATE), '{short}')", name.this))


# Spark's names of truncation units that DuckDB does not know, and the name it does.
_TRUNC_UNITS = {"YYYY": "YEAR", "YY": "YEAR", "MON": "MONTH", "MM": "MONTH", "DD": "DAY"}


def _spark_trunc(call: exp.DateTrunc | exp.TimestampTrunc) -> exp.Expr:
    """`date_trunc` and `trunc` with Spark's unit names (`MM`, `YY`, `DD` ...); `trunc` of a
    date is a DATE, as in Spark (DuckDB's is a TIMESTAMP)."""
    unit = call.args.get("unit")
    if isinstance(unit, exp.Literal | exp.Var) and unit.name.upper() in _TRUNC_UNITS:
        call.set("unit", exp.Literal.string(_TRUNC_UNITS[unit.name.upper()]))
    return (
        exp.cast(call.copy(), exp.DataType.Type.DATE) if isinstance(call, exp.DateTrunc) else call
    )


def _months_between(call: exp.MonthsBetween) -> exp.Expr:
    """Spark's months_between: whole months when the days of month match or both are last
    days, else the days and the time of day (whole seconds) over 31-day months, rounded to 8
    places unless `roundOff` is false (sqlglot's leaves the time of day out)."""
    a, b = "CAST(__0 AS TIMESTAMP)", "CAST(__1 AS TIMESTAMP)"
    months = f"(year({a}) * 12 + month({a}) - year({b}) * 12 - month({b}))"
    same = (
        f"day({a}) = day({b}) OR (day({a}) = day(last_day({a})) AND day({b}) = day(last_day({b})))"
    )
    seconds = " - ".join(
        f"(day({t}) * 86400 + hour({t}) * 3600 + minute({t}) * 60 + second({t}))" for t in (a, b)
    )
    diff = f"CASE WHEN {same} THEN {months} ELSE {months} + ({seconds}) / 2678400.0 END"
    roundoff = call.args.get("roundoff")
    if not (isinstance(roundoff, exp.Boolean) and not roundoff.this):
        diff = f"round({diff}, 8)"
    return duckdb_expr(f"CAST({diff} AS DOUBLE)", call.this, call.expression)


def _seconds_with_fraction(ts: exp.Expr) -> exp.Expr:
    """Spark's `extract(SECOND FROM ts)` and `date_part('second', ts)` keep the fraction, as a
    DECIMAL(8, 6) (DuckDB's are whole seconds)."""
    return duckdb_expr("CAST(date_part('microseconds', __0) / 1000000 AS DECIMAL(8, 6))", ts)


# Interval units that move a DATE by whole days: Spark's DATE plus one of them is a DATE.
_DAYS = frozenset(
    {"YEAR", "YEARS", "QUARTER", "QUARTERS", "MONTH", "MONTHS", "WEEK", "WEEKS", "DAY", "DAYS"}
)


def _in_days(node: exp.Expr) -> bool:
    return (
        isinstance(node, exp.Interval) and node.unit is not None and node.unit.name.upper() in _DAYS
    )


def dates_plus_days(tree: exp.Expr) -> None:
    """A DATE plus or minus an interval of days, months or years is a DATE, as in Spark (DuckDB
    gives a TIMESTAMP), where sqlglot could tell the DATE."""
    date = exp.DataType.Type.DATE
    for op in reversed(list(tree.find_all(exp.Add, exp.Sub))):  # innermost first
        this, that = operand_type(op, "this"), operand_type(op, "expression")
        later = this == date and _in_days(op.expression)
        earlier = isinstance(op, exp.Add) and that == date and _in_days(op.this)
        if later or earlier:
            op.replace(exp.cast(op.copy(), exp.DataType.Type.DATE))


def dates_subtracted(tree: exp.Expr) -> None:
    """A DATE minus a DATE as Spark's interval of days (DuckDB's is a number of days), where
    sqlglot could tell the operands' types."""
    date = exp.DataType.Type.DATE
    for sub in reversed(list(tree.find_all(exp.Sub))):  # innermost first
        if operand_type(sub, "this") == date and operand_type(sub, "expression") == date:
            days = duckdb_expr("to_days(CAST(__0 - __1 AS INTEGER))", sub.this, sub.expression)
            sub.replace(days)


_SECOND = frozenset({"SECOND", "SECONDS", "SEC", "SECS", "S"})


_TRIED = "spark_try_to_date"


def try_to_dates(tree: exp.Expr) -> None:
    """try_to_date as to_date that gives NULL for text it cannot read, before the patterns are
    translated."""
    for call in list(tree.find_all(exp.Anonymous)):
        if call.name.lower() == "try_to_date" and 1 <= len(call.expressions) <= 2:
            to_date = exp.func("to_date", *call.expressions, dialect=SparkQuery)
            to_date.meta[_TRIED] = True  # sqlglot marks every to_date `safe` (legacy Spark's)
            call.replace(to_date)


def to_dates(tree: exp.Expr) -> None:
    """to_date(s) as Spark's: a cast to DATE, which the casts then make Spark's (sqlglot read the
    legacy one, NULL for text it cannot read); to_date(s, pattern) a parse by the pattern, all
    of the text (sqlglot wrote a cast for 'yyyy-MM-dd', which read '2024-06-01 10:00'). Both stop
    at text they cannot read, and try_to_date gives NULL there."""
    for to_date in reversed(list(tree.find_all(exp.TsOrDsToDate))):  # innermost first
        safe = bool(to_date.meta.get(_TRIED))
        pattern = to_date.args.get("format")
        if pattern is None:
            day = exp.DataType.build("DATE")
            # as sqlglot reads Spark's CAST: a TryCast, strict unless `safe` (try_cast)
            to_date.replace(exp.TryCast(this=to_date.this, to=day, safe=safe or None))
        else:
            parse = "try_strptime" if safe else "strptime"
            parsed = (  # a time or date is no text: Spark ignores the pattern
                f"CASE WHEN typeof(__0) = 'VARCHAR' THEN CAST({parse}(CAST(__0 AS VARCHAR), __1) "
                "AS DATE) ELSE CAST(__0 AS DATE) END"
            )
            to_date.replace(duckdb_expr(parsed, to_date.this, pattern))


# Spark's timestampdiff units counted in microseconds (DAY and WEEK too: the session is UTC).
_MICROS = {
    "MICROSECOND": 1,
    "MILLISECOND": 1_000,
    "SECOND": 1_000_000,
    "MINUTE": 60_000_000,
    "HOUR": 3_600_000_000,
    "DAY": 86_400_000_000,
    "WEEK": 604_800_000_000,
}
_MONTHS = {"MONTH": 1, "QUARTER": 3, "YEAR": 12}


def _whole_units(unit: str, start: exp.Expr, end: exp.Expr) -> exp.Expr:
    """Spark's `timestampdiff(unit, start, end)`: whole units from start to end, cut toward
    zero (java.time's `until`); DuckDB's date_diff counts the unit's boundaries crossed."""
    a, b = "CAST(__0 AS TIMESTAMP)", "CAST(__1 AS TIMESTAMP)"
    if unit in _MICROS:
        return duckdb_expr(
            f"CAST(trunc((epoch_us({b}) - epoch_us({a})) / {_MICROS[unit]}) AS BIGINT)", start, end
        )
    # Whole months as java.time counts them: the end date moved back (on) a day when its time
    # of day is before (after) the start's, then months of 32-day steps between the dates.
    day_a, day_b = f"CAST({a} AS DATE)", f"CAST({b} AS DATE)"
    end_day = (
        f"CASE WHEN {day_b} > {day_a} AND CAST({b} AS TIME) < CAST({a} AS TIME) THEN {day_b} - 1 "
        f"WHEN {day_b} < {day_a} AND CAST({b} AS TIME) > CAST({a} AS TIME) THEN {day_b} + 1 "
        f"ELSE {day_b} END"
    )

    def packed(day: str) -> str:
        return f"((year({day}) * 12 + month({day})) * 32 + day({day}))"

    months = f"trunc(({packed(end_day)} - {packed(day_a)}) / 32)"
    return duckdb_expr(f"CAST(trunc({months} / {_MONTHS[unit]}) AS BIGINT)", start, end)


def _undated(node: exp.Expr) -> exp.Expr:
    """An operand of a three-argument datediff without the cast to DATE sqlglot gave it."""
    return node.this if isinstance(node, exp.TsOrDsToDate) else node


def timestamp_diffs(tree: exp.Expr) -> None:
    """`timestampdiff(unit, a, b)` and its three-argument spellings `datediff` and `date_diff`
    (sqlglot reads those as a day count of DATEs) count whole units of timestamps."""
    for diff in reversed(list(tree.find_all(exp.TimestampDiff, exp.DateDiff))):
        unit = diff.args.get("unit")
        if unit is None:  # datediff(end, start): days between dates, as sqlglot writes it
            continue
        name = unit.name.upper()
        if name not in _MICROS and name not in _MONTHS:
            raise UserError(f"query: timestampdiff: no unit {unit.name!r} in Spark")
        diff.replace(_whole_units(name, _undated(diff.expression), _undated(diff.this)))


def dates_like_spark(tree: exp.Expr) -> None:
    """Dates stay DATEs, truncation units, months_between and the second's fraction."""
    for date in reversed(list(tree.find_all(exp.TsOrDsAdd, exp.AddMonths, exp.DateFromUnixDate))):
        date.replace(exp.cast(date.copy(), exp.DataType.Type.DATE))
    for trunc in reversed(list(tree.find_all(exp.DateTrunc, exp.TimestampTrunc))):
        trunc.replace(_spark_trunc(trunc))
    for between in reversed(list(tree.find_all(exp.MonthsBetween))):
        between.replace(_months_between(between))
    for part in reversed(list(tree.find_all(exp.Extract, exp.Anonymous))):
        if isinstance(part, exp.Extract):
            unit, ts = part.this, part.expression
        elif part.name.lower() == "date_part" and len(part.expressions) == 2:
            unit, ts = part.expressions
        else:
            continue
        if unit.name.upper() in _SECOND:
            part.replace(_seconds_with_fraction(ts))
