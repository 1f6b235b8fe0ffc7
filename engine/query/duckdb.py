"""The embedded engine of `query`: Spark SQL transpiled by sqlglot, run by DuckDB in memory.

The query's tables arrive as Arrow (read with delta-rs, `engine.query.read_tables`) and are
registered in a fresh in-memory DuckDB connection under their names. The connection then
loses file-system access and its configuration is locked, so a query can only read those
tables. sqlglot's Spark-to-DuckDB translation is completed here for what the lake's queries
use and sqlglot leaves out or gets different from Spark:

* `window(ts, '5 minutes')` (tumbling) becomes a struct of DuckDB `time_bucket` start and end,
  aligned to the epoch as Spark does; sliding windows (a slide shorter than the window) are
  refused with a pointer to `--engine spark`;
* `unix_timestamp(ts)` of a timestamp column gives whole epoch seconds;
* `date_add`, `date_sub` and `add_months` stay DATEs (DuckDB's date + interval is a TIMESTAMP);
* `from_utc_timestamp(ts, tz)` and `to_utc_timestamp(ts, tz)` shift the way Spark's do (sqlglot's
  `AT TIME ZONE` shifts a UTC time away from tz instead, and gives a time without a zone);
* `LATERAL VIEW [OUTER] explode(...)` becomes `CROSS JOIN UNNEST` (`LEFT JOIN ... ON TRUE` when
  OUTER, keeping rows with an empty or NULL array as Spark does);
* output columns without an alias get Spark-like names (`count(1)`, `sum(price)`, `hour(ts)`);
* integral DECIMAL(38, 0) results (DuckDB's HUGEINT sums) come back as BIGINT, as in Spark;
* `dayofweek(d)` and `extract(DOW FROM d)` count from 1 (Sunday) as in Spark, not from 0;
* `S` fractions of a second in a date format (`ss.SSS`) become DuckDB's `%g`, `%f`, `%n`;
* `a / b`, `a % b` and `a div b` with `b` zero stop the query, as on Spark (ANSI, its default):
  sqlglot's `/` gives NULL (Spark's legacy mode), DuckDB's infinity, and DuckDB's `%` stops
  with advice that does not apply; `try_divide` and `try_mod` give NULL on both;
* `pmod(a, b)` (DuckDB has none) is Spark's: `a % b`, plus `b` when that is negative;
* `CAST` stops at a value it cannot take, as Spark's (ANSI) does, where sqlglot's TRY_CAST gives
  NULL; to an integer type (also `bigint(x)`, `tinyint(x)`, ...) a fraction is cut off, not
  rounded, and text must be a whole number; `try_cast` gives NULL there instead;
* in `filter(a, (x, i) -> ...)` and `transform(a, (x, i) -> ...)` the index counts from 0 as in
  Spark (DuckDB's from 1); `array_distinct`, `array_intersect`, `array_except`, `array_union`,
  `array_remove`, `array_position`, `array_contains` and `flatten` are Spark's (`_SPARK_ARRAYS`:
  first places and NULLs kept, 0 for a missing position, NULL for "maybe");
* `LIKE` escapes with `\\` as Spark's does, `substring(s, 0, n)` reads the 0 as 1, and
  `format_string` is `printf`, as in Spark (stopping at a NULL argument, which Spark prints as
  'null'; a tie rounds to even, `%.1f` of 1.25 is 1.2 where Spark's Java gives 1.3);
* a PIVOT cell without rows is NULL for a count too, as in Spark (DuckDB's count gave 0), and
  a lone aggregate's alias does not name the columns (a distinct count is refused);
* dates as Spark has them: `trunc(d, unit)` is a DATE, Spark's unit names (`MM`, `YY`, `DD`)
  are understood, `months_between` counts the time of day, `weekday` is 0 on Monday,
  `extract(SECOND ...)` and `date_part('second', ...)` keep the fraction,
  `date_from_unix_date` is a DATE;
* `skewness` and `kurtosis` are the population's, as Spark's (DuckDB's are the sample's);
* `round` of a DOUBLE rounds its shortest decimal form half up, as Spark's (0.285 to 0.29;
  DuckDB rounds the binary value, 0.28), where sqlglot can tell the type from the tables';
* a logarithm of a value (or base) not above 0 is NULL, as in Spark (DuckDB: -Infinity, error);
* hints are dropped; `hash()` and `xxhash64()`, which DuckDB computes otherwise, are refused;
* the tables' times are registered as TIMESTAMPs (their UTC wall clock) and the result's come
  back as UTC times: a time turned into text reads as Spark's, with no '+00'.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import sqlglot
from sqlglot import exp
from sqlglot.optimizer.annotate_types import annotate_types
from sqlglot.optimizer.qualify import qualify

from engine.definitions.durations import parse_duration
from engine.definitions.sql import SparkStreaming
from engine.errors import UserError, first_line
from engine.lake import LATEST, Snapshot
from engine.lake.values import replace_leaves
from engine.query import parse_query, read_tables
from engine.query.functions import check_bare_names

__all__ = ["connect", "run_duckdb", "to_duckdb_sql"]

SPARK_HINT = "try --engine spark"

_EPOCH = "TIMESTAMPTZ '1970-01-01 00:00:00+00'"
# The format sqlglot fills in for Spark's one-argument unix_timestamp(x).
_DEFAULT_UNIX_FORMAT = sqlglot.parse_one("unix_timestamp(x)", read=SparkStreaming).args["format"]


def _duckdb_expr(sql: str) -> exp.Expr:
    return sqlglot.parse_one(sql, read="duckdb")


def _interval(arg: exp.Expr, what: str) -> str:
    try:
        if not (isinstance(arg, exp.Literal) and arg.is_string):
            raise ValueError("not a string literal")
        return parse_duration(arg.name).interval_sql()
    except ValueError:
        raise UserError(
            f"query: window(): {what} must be a literal like '5 minutes', got "
            f"{arg.sql(dialect='spark')} ({SPARK_HINT})"
        ) from None


def _window(call: exp.Anonymous) -> exp.Expr:
    """Spark's tumbling `window(ts, duration)` as a struct(start, end) of time buckets."""
    args = call.expressions
    if len(args) not in (2, 3):
        raise UserError(
            f"query: {call.sql(dialect='spark')}: the DuckDB engine knows window(ts, duration) "
            f"and window(ts, duration, same slide) only ({SPARK_HINT})"
        )
    size = _interval(args[1], "the duration")
    if len(args) == 3 and _interval(args[2], "the slide") != size:
        raise UserError(
            f"query: {call.sql(dialect='spark')}: sliding windows are not supported by the "
            f"DuckDB engine ({SPARK_HINT})"
        )
    ts = f"CAST(({args[0].sql(dialect='duckdb')}) AS TIMESTAMPTZ)"
    start = f"time_bucket({size}, {ts}, {_EPOCH})"
    return _duckdb_expr(f'struct_pack(start := {start}, "end" := {start} + {size})')


def _shift_zone(node: exp.AtTimeZone | exp.FromTimeZone) -> exp.Expr:
    """Spark's from_utc_timestamp (parsed as AtTimeZone) and to_utc_timestamp (FromTimeZone)
    in DuckDB, whose session is in UTC. sqlglot's argument is the time as a TIMESTAMP: its UTC
    wall clock."""
    wall = node.this.sql(dialect="duckdb")
    zone = node.args["zone"].sql(dialect="duckdb")
    if isinstance(node, exp.AtTimeZone):  # the UTC time's wall clock in zone, as a UTC time
        return _duckdb_expr(f"CAST(CAST({wall} AS TIMESTAMPTZ) AT TIME ZONE {zone} AS TIMESTAMPTZ)")
    return _duckdb_expr(f"({wall}) AT TIME ZONE {zone}")  # the wall clock read in zone


# Spark's fraction of a second, one S per digit, where sqlglot maps only SSSSSS: DuckDB
# formats milliseconds, microseconds and nanoseconds.
_FRACTIONS = {3: "%g", 6: "%f", 9: "%n"}


def _fractions(node: exp.TimeToStr | exp.StrToTime) -> None:
    """The S runs sqlglot left in a date format (not %S, seconds) as DuckDB's fractions."""
    fmt = node.args.get("format")
    if not (isinstance(fmt, exp.Literal) and fmt.is_string):
        return

    def digits(run: re.Match[str]) -> str:
        if len(run.group()) not in _FRACTIONS:
            raise UserError(
                f"query: date format {run.group()!r}: the DuckDB engine formats 3, 6 or 9 "
                f"digits of a second ({SPARK_HINT})"
            )
        return _FRACTIONS[len(run.group())]

    fmt.replace(exp.Literal.string(re.sub(r"(?<!%)S+", digits, fmt.name)))


DIVIDE_BY_ZERO = "division by zero (try_divide(a, b) gives NULL instead)"
REMAINDER_BY_ZERO = "remainder by zero (try_mod(a, b) gives NULL instead)"


def _stop_at_zero(op: exp.Div | exp.Mod | exp.IntDiv) -> exp.Expr:
    """Spark's `a / b`, `a % b` or `a div b` in DuckDB, stopping the query when `b` is zero
    and `a` is not NULL (a NULL `a` gives NULL on Spark whatever `b` is)."""
    plain = op.copy()
    if isinstance(plain, exp.Div):
        plain.set("safe", False)
    zero = exp.and_(
        exp.EQ(this=exp.Paren(this=op.expression.copy()), expression=exp.Literal.number(0)),
        exp.Not(this=exp.Is(this=exp.Paren(this=op.this.copy()), expression=exp.Null())),
    )
    said = REMAINDER_BY_ZERO if isinstance(op, exp.Mod) else DIVIDE_BY_ZERO
    stop = exp.Anonymous(this="error", expressions=[exp.Literal.string(said)])
    return exp.Case().when(zero, stop).else_(plain)


def _try_mod(call: exp.Anonymous) -> exp.Expr:
    """Spark's try_mod(a, b): NULL where `b` is zero (DuckDB has no such function)."""
    if len(call.expressions) != 2:
        return call
    a, b = (f"({arg.sql(dialect='duckdb')})" for arg in call.expressions)
    return _duckdb_expr(f"CASE WHEN {b} <> 0 THEN {a} % {b} END")


def _pmod(call: exp.Anonymous) -> exp.Expr:
    """Spark's pmod(a, b) as Spark computes it, in `%`s that stop at a zero `b` as Spark's
    does (DuckDB has no pmod): `a % b`, plus `b` (then `% b` again) when it is negative."""
    if len(call.expressions) != 2:
        return call
    a, b = (f"({arg.sql(dialect='spark')})" for arg in call.expressions)
    return sqlglot.parse_one(
        f"CASE WHEN {a} % {b} < 0 THEN ({a} % {b} + {b}) % {b} ELSE {a} % {b} END", read="spark"
    )


CAST_MALFORMED = "because it is malformed (try_cast gives NULL instead)"
_INTEGRAL = {exp.DataType.Type.TINYINT, exp.DataType.Type.SMALLINT, exp.DataType.Type.INT}
_INTEGRAL |= {exp.DataType.Type.BIGINT}
# Spark's casts written as calls that sqlglot leaves as calls (it reads int(x) as a CAST), and
# the type each casts to: decimal(x) is Spark's DECIMAL(10, 0), not DuckDB's DECIMAL(18, 3).
_CAST_CALLS = {t.lower(): t for t in ("TINYINT", "SMALLINT", "BIGINT", "BINARY")}
_CAST_CALLS["decimal"] = "DECIMAL(10, 0)"
_OTHER_HASHES = frozenset({"hash", "xxhash64"})


def _spark_cast(cast: exp.Cast) -> exp.Expr:
    """Spark's CAST (ANSI, its default) or try_cast (`safe`) in DuckDB. A value CAST cannot
    take stops the query (sqlglot writes TRY_CAST, NULL). To an integer type, a fraction is cut
    off as Spark does (DuckDB rounds) and text must be a whole number (DuckDB takes '7.9', '1e3',
    '0x1A'); try_cast gives NULL where CAST stops."""
    safe = bool(cast.args.get("safe"))
    if cast.to.this not in _INTEGRAL:
        return cast if safe else exp.Cast(this=cast.this, to=cast.args["to"])
    x, to = f"({cast.this.sql(dialect='duckdb')})", cast.to.sql(dialect="duckdb")
    convert = "TRY_CAST" if safe else "CAST"
    text = f"CAST({x} AS VARCHAR)"
    head = exp.Literal.string("the value '").sql(dialect="duckdb")
    tail = f"' cannot be cast to {cast.to.sql(dialect='spark')} {CAST_MALFORMED}"
    tail = exp.Literal.string(tail).sql(dialect="duckdb")
    malformed = "NULL" if safe else f"error(concat({head}, {text}, {tail}))"
    return _duckdb_expr(
        f"CASE WHEN typeof({x}) = 'VARCHAR' THEN CASE "
        rf"WHEN NOT regexp_full_match({text}, '\s*[+-]?[0-9]+\s*') THEN {malformed} "
        f"ELSE {convert}(trim({text}) AS {to}) END "
        f"WHEN typeof({x}) IN ('DOUBLE', 'FLOAT') "
        f"THEN {convert}(trunc(CAST({x} AS DOUBLE)) AS {to}) "
        f"WHEN typeof({x}) LIKE 'DECIMAL%' THEN {convert}(split_part({text}, '.', 1) AS {to}) "
        f"ELSE {convert}({x} AS {to}) END"
    )


def _index_from_zero(call: exp.ArrayFilter | exp.Transform) -> None:
    """Spark's `filter(a, (x, i) -> ...)` and `transform(a, (x, i) -> ...)` count `i` from 0,
    DuckDB's lambdas from 1: the body reads `i - 1` where Spark's reads `i`."""
    lam = call.expression
    if not isinstance(lam, exp.Lambda) or len(lam.expressions) != 2:
        return
    index = lam.expressions[1].name
    for name in list(lam.this.find_all(exp.Identifier)):
        if name.name == index and not isinstance(name.parent, exp.Lambda):
            name.replace(
                exp.Paren(this=exp.Sub(this=name.copy(), expression=exp.Literal.number(1)))
            )


# Spark's array functions whose DuckDB namesakes differ, as DuckDB SQL over their arguments
# {0}, {1}: Spark keeps each value's first place and NULLs (DuckDB's set functions sort by hash
# and drop NULLs), finds a NULL in an array as "maybe" (NULL), and counts a missing position as
# 0. The lambdas' names stay clear of the arguments' columns.
_FIRST = "list_position({0}, __e) = __i"
_SPARK_ARRAYS: dict[type[exp.Expr] | str, str] = {
    exp.ArrayDistinct: f"list_filter({{0}}, lambda __e, __i: {_FIRST})",
    exp.ArrayIntersect: "CASE WHEN {1} IS NULL THEN NULL ELSE list_filter({0}, lambda __e, __i: "
    f"{_FIRST} AND list_position({{1}}, __e) IS NOT NULL) END",
    exp.ArrayExcept: "CASE WHEN {1} IS NULL THEN NULL ELSE list_filter({0}, lambda __e, __i: "
    f"{_FIRST} AND list_position({{1}}, __e) IS NULL) END",
    "array_union": "CASE WHEN {0} IS NULL OR {1} IS NULL THEN NULL ELSE list_filter("
    "list_concat({0}, {1}), lambda __e, __i: list_position(list_concat({0}, {1}), __e) = __i) END",
    exp.ArrayRemove: "CASE WHEN {1} IS NULL THEN NULL "
    "ELSE list_filter({0}, lambda __e: __e IS NULL OR __e <> {1}) END",
    exp.ArrayPosition: "CASE WHEN {1} IS NULL THEN NULL ELSE coalesce(list_position({0}, {1}), "
    "CASE WHEN {0} IS NOT NULL THEN 0 END) END",
    exp.ArrayContains: "CASE WHEN {1} IS NULL THEN NULL WHEN list_contains({0}, {1}) THEN true "
    "WHEN list_position({0}, NULL) IS NOT NULL THEN NULL ELSE list_contains({0}, {1}) END",
    exp.Flatten: "CASE WHEN list_position({0}, NULL) IS NOT NULL THEN NULL ELSE flatten({0}) END",
}


def _spark_log(call: exp.Ln | exp.Log) -> exp.Expr:
    """Spark's logarithms are NULL for a value (or base) not above 0; DuckDB's ln(0) is
    -Infinity and ln(-1) an error."""
    args = [call.this] if isinstance(call, exp.Ln) else [call.this, call.expression]
    bad = exp.or_(
        *(exp.LTE(this=exp.Paren(this=a.copy()), expression=exp.Literal.number(0)) for a in args)
    )
    return exp.Case().when(bad, exp.Null()).else_(call.copy())


def _spark_moment(call: exp.Skewness | exp.Kurtosis) -> exp.Expr:
    """Spark's skewness and kurtosis are the population's (DuckDB's the sample's), NULL where
    the values do not vary; two values that do are symmetric (DuckDB: NULL under three)."""
    x = f"({call.this.sql(dialect='duckdb')})"
    if isinstance(call, exp.Kurtosis):
        moment = f"kurtosis_pop({x})"
    else:
        n = f"count({x})"
        sample = f"skewness({x}) * ({n} - 2) / sqrt({n} * ({n} - 1))"
        moment = f"CASE WHEN {n} = 2 THEN 0.0 ELSE {sample} END"
    return _duckdb_expr(f"CASE WHEN min({x}) = max({x}) THEN NULL ELSE {moment} END")


def _spark_array(call: exp.Expr) -> exp.Expr:
    """`call` as Spark computes it, by its template in `_SPARK_ARRAYS`, or as it was."""
    name = call.name.lower() if isinstance(call, exp.Anonymous) else type(call)
    if name not in _SPARK_ARRAYS:
        return call
    if isinstance(call, exp.Anonymous | exp.ArrayIntersect):
        args = call.expressions
    else:
        args = [a for a in (call.this, call.args.get("expression")) if a is not None]
    sql = [f"({a.sql(dialect='duckdb')})" for a in args]
    return _duckdb_expr(_SPARK_ARRAYS[name].format(*sql))


def _escape_like(like: exp.Like | exp.ILike) -> None:
    """Spark's LIKE takes `\\` as its escape (`'a\\_c'` matches `a_c` only); DuckDB's has none
    unless told."""
    if isinstance(like.parent, exp.Escape) or isinstance(like.expression, exp.Any | exp.All):
        return
    like.replace(exp.Escape(this=like.copy(), expression=exp.Literal.string("\\")))


def _start_at_one(call: exp.Substring) -> None:
    """Spark's substring reads a start of 0 as 1 (`substring('hello', 0, 2)` is 'he'); DuckDB
    counts the 0 as a place before the text ('h')."""
    start, one = call.args.get("start"), exp.Literal.number(1)
    if isinstance(start, exp.Literal):
        if start.to_py() == 0:
            call.set("start", one)
    elif start is not None:
        zero = exp.EQ(this=start.copy(), expression=exp.Literal.number(0))
        call.set("start", exp.Case().when(zero, one).else_(start.copy()))


FORMAT_NULL = "format_string() of a NULL: Spark prints it as 'null', DuckDB's printf cannot"


def _format_string(call: exp.Format) -> exp.Expr:
    """Spark's format_string is printf's (sqlglot's FORMAT is DuckDB's `{}` format, which gave
    the pattern back as it was); a NULL argument, which Spark prints as 'null', stops it."""
    args = [call.this, *call.expressions]
    printf = exp.Anonymous(this="printf", expressions=[a.copy() for a in args])
    stop = exp.Anonymous(this="error", expressions=[exp.Literal.string(FORMAT_NULL)])
    null = exp.or_(*(exp.Is(this=exp.Paren(this=a.copy()), expression=exp.Null()) for a in args))
    return exp.Case().when(null, stop).else_(printf)


def _spark_pivot(pivot: exp.Pivot) -> None:
    """A PIVOT as Spark's: a cell without rows is NULL whatever the aggregate, where DuckDB
    counts 0, so a count becomes a sum of ones, NULL over no rows (DuckDB allows one aggregate
    a cell); a lone aggregate's alias names no column (DuckDB's were `www_n`, Spark's `www`)."""
    if pivot.args.get("unpivot"):
        return
    if len(pivot.expressions) == 1 and isinstance(pivot.expressions[0], exp.Alias):
        pivot.expressions[0].replace(pivot.expressions[0].this)
    for aggregate in pivot.expressions:
        counted = aggregate.this if isinstance(aggregate, exp.Alias) else aggregate
        if isinstance(counted, exp.CountIf):
            ones = exp.If(this=counted.this.copy(), true=exp.Literal.number(1))
        elif isinstance(counted, exp.Count) and isinstance(counted.this, exp.Star):
            ones = exp.Literal.number(1)
        elif isinstance(counted, exp.Count | exp.ApproxDistinct):
            if isinstance(counted.this, exp.Distinct) or not isinstance(counted, exp.Count):
                raise UserError(
                    "query: PIVOT: a distinct count of a cell without rows is NULL on Spark, 0 "
                    f"on DuckDB ({SPARK_HINT})"
                )
            kept = [counted.this, *counted.expressions]
            every = exp.and_(
                *(exp.Not(this=exp.Is(this=k.copy(), expression=exp.Null())) for k in kept)
            )
            ones = exp.If(this=every, true=exp.Literal.number(1))
        else:
            continue
        if isinstance(ones, exp.If):
            ones.set("false", exp.Literal.number(0))
        counted.replace(exp.Sum(this=ones))


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
    a, b = (f"CAST(({t.sql(dialect='duckdb')}) AS TIMESTAMP)" for t in (call.this, call.expression))
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
    return _duckdb_expr(f"CAST({diff} AS DOUBLE)")


def _seconds_with_fraction(call: exp.Extract | exp.Anonymous) -> exp.Expr:
    """Spark's `extract(SECOND FROM ts)` and `date_part('second', ts)` keep the fraction, as a
    DECIMAL(8, 6) (DuckDB's are whole seconds)."""
    ts = (call.expression if isinstance(call, exp.Extract) else call.expressions[1]).sql(
        dialect="duckdb"
    )
    return _duckdb_expr(f"CAST(date_part('microseconds', {ts}) / 1000000 AS DECIMAL(8, 6))")


def _lateral_to_join(select: exp.Select) -> None:
    """LATERAL VIEW [OUTER] explode(a) t AS x  ->  CROSS|LEFT JOIN UNNEST(a) AS t(x) [ON TRUE]."""
    for lateral in list(select.args.get("laterals") or []):
        if not lateral.args.get("view") or not isinstance(lateral.this, exp.Explode):
            continue
        alias = lateral.args.get("alias")
        unnest = exp.Unnest(expressions=[lateral.this.this.copy()], alias=alias and alias.copy())
        outer = bool(lateral.args.get("outer"))
        join = exp.Join(
            this=unnest,
            kind=None if outer else "CROSS",
            side="LEFT" if outer else None,
            on=exp.true() if outer else None,
        )
        lateral.pop()
        select.append("joins", join)


def _spark_name(projection: exp.Expr) -> str:
    """Roughly the name Spark gives an unaliased output expression."""
    if isinstance(projection, exp.Count) and isinstance(projection.this, exp.Star):
        return "count(1)"
    if isinstance(projection, exp.Explode):
        return "col"
    if isinstance(projection, exp.Anonymous) and projection.name.lower() == "window":
        return "window"
    named = projection.copy()
    for paren in list(named.find_all(exp.Paren)):
        paren.replace(paren.this)
    for column in list(named.find_all(exp.Column)):
        column.replace(exp.column(column.name))
    for literal in list(named.find_all(exp.Literal)):
        if literal.is_string:
            literal.replace(exp.var(literal.name))
    for binary in list(named.find_all(exp.Binary)):
        if not isinstance(binary, exp.Dot):
            binary.replace(exp.Paren(this=binary.copy()))
    if isinstance(named, exp.Binary) and not isinstance(named, exp.Dot):
        named = exp.Paren(this=named)
    return named.sql(dialect="spark", normalize_functions="lower")


def _name_outputs(select: exp.Select) -> None:
    for projection in list(select.expressions):
        if isinstance(projection, exp.Alias | exp.Column | exp.Star | exp.Dot):
            continue
        projection.replace(exp.alias_(projection.copy(), _spark_name(projection), quoted=True))


def _schema(tables: Mapping[str, pa.Table]) -> dict[str, dict[str, str]]:
    """The tables' column types as SQL, for sqlglot's type inference (nested ones unknown)."""
    scalar = {
        pa.types.is_float64: "DOUBLE",
        pa.types.is_float32: "FLOAT",
        pa.types.is_integer: "BIGINT",
        pa.types.is_string: "STRING",
        pa.types.is_large_string: "STRING",
        pa.types.is_boolean: "BOOLEAN",
        pa.types.is_timestamp: "TIMESTAMP",
        pa.types.is_date: "DATE",
    }

    def sql(t: pa.DataType) -> str:
        if pa.types.is_decimal(t):
            return f"DECIMAL({t.precision}, {t.scale})"
        return next((name for test, name in scalar.items() if test(t)), "UNKNOWN")

    return {name: {f.name: sql(f.type) for f in table.schema} for name, table in tables.items()}


def _doubles_rounded(tree: exp.Query, schema: Mapping[str, Mapping[str, str]]) -> list[exp.Round]:
    """The `round` calls of `tree` whose first argument is a DOUBLE, as far as sqlglot can tell
    from the tables' types; none where it cannot qualify the query."""
    try:
        typed = annotate_types(
            qualify(tree.copy(), schema=schema, dialect="spark", validate_qualify_columns=False),
            schema=schema,
            dialect="spark",
        )
    except sqlglot.errors.SqlglotError:
        return []
    calls, typed_calls = list(tree.find_all(exp.Round)), list(typed.find_all(exp.Round))
    if len(calls) != len(typed_calls):  # not the same calls: trust none
        return []
    double = exp.DataType.Type.DOUBLE
    return [c for c, t in zip(calls, typed_calls, strict=True) if t.this.type.this == double]


def _round_half_up(call: exp.Round) -> exp.Expr:
    """Spark's round of a DOUBLE: half up on its shortest decimal form (0.285 is 0.29), where
    DuckDB rounds the binary value (0.28499999999999998, so 0.28)."""
    x = f"({call.this.sql(dialect='duckdb')})"
    places = call.args.get("decimals")
    n = places.sql(dialect="duckdb") if places else "0"
    # Past 1e17 a double has no fraction left to round; DECIMAL(38, 20) holds what is below.
    exact = f"CAST(round(CAST(CAST({x} AS VARCHAR) AS DECIMAL(38, 20)), {n}) AS DOUBLE)"
    return _duckdb_expr(
        f"CASE WHEN isfinite({x}) AND abs({x}) < 1e17 THEN {exact} ELSE round({x}, {n}) END"
    )


def to_duckdb_sql(tree: exp.Query, schema: Mapping[str, Mapping[str, str]] | None = None) -> str:
    """The DuckDB SQL for a parsed Spark SQL query (see the module docstring for the rewrites);
    `schema` (`_schema` of the tables) lets it round DOUBLEs as Spark does."""
    tree = tree.copy()
    for call in _doubles_rounded(tree, schema or {}):  # before any rewrite changes the tree
        call.replace(_round_half_up(call))
    outer = tree if isinstance(tree, exp.Select) else None
    if outer is not None:
        _name_outputs(outer)
    for hint in list(tree.find_all(exp.Hint)):
        hint.pop()  # Spark's planner hints (BROADCAST, REPARTITION, ...) mean nothing here
    for day in list(tree.find_all(exp.DayOfWeek, exp.Extract)):
        if isinstance(day, exp.Extract) and day.name.upper() not in ("DOW", "DAYOFWEEK"):
            continue
        day.replace(exp.Paren(this=exp.Add(this=day.copy(), expression=exp.Literal.number(1))))
    for call in list(tree.find_all(exp.Anonymous)):
        if call.name.lower() == "window":
            call.replace(_window(call))
    for to_unix in list(tree.find_all(exp.StrToUnix)):
        if to_unix.args.get("format") == _DEFAULT_UNIX_FORMAT:
            ts = f"CAST(({to_unix.this.sql(dialect='duckdb')}) AS TIMESTAMPTZ)"
            seconds = f"CAST(FLOOR(epoch({ts})) AS BIGINT)"
            to_unix.replace(_duckdb_expr(seconds))
    for shift in reversed(list(tree.find_all(exp.AtTimeZone, exp.FromTimeZone))):
        shift.replace(_shift_zone(shift))  # innermost first: an outer one reads its SQL
    for formatted in list(tree.find_all(exp.TimeToStr, exp.StrToTime)):
        _fractions(formatted)
    for call in list(tree.find_all(exp.Anonymous)):  # before the `%`s are made to stop at 0
        if call.name.lower() == "pmod":
            call.replace(_pmod(call))
    for op in reversed(list(tree.find_all(exp.Div, exp.Mod, exp.IntDiv))):  # innermost first
        # Spark's `/` is a `safe` Div (NULL for a zero, as sqlglot writes it); try_divide is
        # another node, NULL for a zero on both engines.
        if not isinstance(op, exp.Div) or op.args.get("safe"):
            op.replace(_stop_at_zero(op))
    for call in list(tree.find_all(exp.Anonymous)):  # after the above: its `%` may see a zero
        if call.name.lower() == "try_mod":
            call.replace(_try_mod(call))
    for call in list(tree.find_all(exp.Anonymous)):
        if call.name.lower() in _OTHER_HASHES:
            # DuckDB has functions of these names that hash differently: a wrong number, quietly.
            raise UserError(
                f"query: {call.name.lower()}(): DuckDB's function of that name computes another "
                f"hash than Spark's ({SPARK_HINT})"
            )
        if call.name.lower() in _CAST_CALLS and len(call.expressions) == 1:
            to = exp.DataType.build(_CAST_CALLS[call.name.lower()], dialect="spark")
            call.replace(exp.Cast(this=call.expressions[0], to=to))  # as sqlglot does int(x)
    for cast in reversed(list(tree.find_all(exp.Cast))):  # innermost first: an outer one
        cast.replace(_spark_cast(cast))  # reads its SQL
    for date_add in list(tree.find_all(exp.TsOrDsAdd, exp.AddMonths)):
        date_add.replace(exp.cast(date_add.copy(), exp.DataType.Type.DATE))  # a DATE in Spark
    for call in list(tree.find_all(exp.ArrayFilter, exp.Transform)):
        _index_from_zero(call)
    for log in reversed(list(tree.find_all(exp.Ln, exp.Log))):  # innermost first
        log.replace(_spark_log(log))
    for moment in list(tree.find_all(exp.Skewness, exp.Kurtosis)):
        moment.replace(_spark_moment(moment))
    for call in reversed(list(tree.find_all(exp.Func))):  # innermost first
        if (spark := _spark_array(call)) is not call:
            call.replace(spark)
    for like in list(tree.find_all(exp.Like, exp.ILike)):
        _escape_like(like)
    for call in list(tree.find_all(exp.Substring)):
        _start_at_one(call)
    for formatted in reversed(list(tree.find_all(exp.Format))):
        formatted.replace(_format_string(formatted))
    for trunc in reversed(list(tree.find_all(exp.DateTrunc, exp.TimestampTrunc))):
        trunc.replace(_spark_trunc(trunc))
    for between in reversed(list(tree.find_all(exp.MonthsBetween))):
        between.replace(_months_between(between))
    for part in reversed(list(tree.find_all(exp.Extract, exp.Anonymous))):
        is_part = isinstance(part, exp.Anonymous) and part.name.lower() == "date_part"
        if is_part and len(part.expressions) == 2:
            unit = part.expressions[0]
        elif isinstance(part, exp.Extract):
            unit = part.this
        else:
            continue
        if unit.name.upper() in ("SECOND", "SECONDS", "SEC", "SECS", "S"):
            part.replace(_seconds_with_fraction(part))
    for call in list(tree.find_all(exp.Anonymous)):
        if call.name.lower() == "weekday" and len(call.expressions) == 1:  # Monday is 0
            day = call.expressions[0].sql(dialect="duckdb")
            call.replace(_duckdb_expr(f"(isodow(CAST({day} AS DATE)) - 1)"))
    for unix_date in list(tree.find_all(exp.DateFromUnixDate)):
        unix_date.replace(exp.cast(unix_date.copy(), exp.DataType.Type.DATE))  # a DATE in Spark
    for pivot in list(tree.find_all(exp.Pivot)):
        _spark_pivot(pivot)
    for select in list(tree.find_all(exp.Select)):
        _lateral_to_join(select)
    try:
        return tree.sql(dialect="duckdb", unsupported_level=sqlglot.ErrorLevel.RAISE)
    except sqlglot.errors.SqlglotError as err:
        raise UserError(
            f"query: cannot translate to DuckDB: {first_line(err)} ({SPARK_HINT})"
        ) from None


def _retype(table: pa.Table, leaf: Callable[[pa.DataType], pa.DataType | None]) -> pa.Table:
    """`table` with each column's types that `leaf` maps to another cast, at any depth."""
    for i, field in enumerate(table.schema):
        kind = replace_leaves(field.type, leaf)
        if kind is not None:
            table = table.set_column(i, field.with_type(kind), table.column(i).cast(kind))
    return table


def _wall_clock(table: pa.Table) -> pa.Table:
    """The lake's times (UTC) as DuckDB TIMESTAMPs, their UTC wall clock, as Spark's are in a
    UTC session: a TIMESTAMPTZ would turn into text with '+00' (CAST(t AS STRING), concat)."""
    return _retype(
        table, lambda t: pa.timestamp(t.unit) if pa.types.is_timestamp(t) and t.tz else None
    )


def _spark_types(result: pa.Table) -> pa.Table:
    """DuckDB's HUGEINT (sum of integers) arrives as DECIMAL(38, 0); Spark gives BIGINT. A
    TIMESTAMP is a UTC time, as Spark's are."""
    result = _retype(
        result, lambda t: pa.timestamp(t.unit, "UTC") if pa.types.is_timestamp(t) else None
    )
    for i, field in enumerate(result.schema):
        if pa.types.is_decimal(field.type) and field.type.scale == 0 and field.type.precision == 38:
            try:
                column = pc.cast(result.column(i), pa.int64())
            except pa.ArrowInvalid:
                continue
            result = result.set_column(i, field.name, column)
    return result


# DuckDB's words for a column or table alias the query names and its tables do not have.
_MISNAMED = re.compile(
    r'not found in FROM clause|does not have a column named|Referenced table ".*" not found'
)


def connect(tables: Mapping[str, pa.Table]) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB with these Arrow tables registered under their names, in UTC,
    without file-system access or extension loading, and with its configuration locked."""
    con = duckdb.connect(":memory:")
    con.execute("SET TimeZone = 'UTC'")
    for name, data in tables.items():
        con.register(name, data)
    con.execute("SET autoinstall_known_extensions = false")
    con.execute("SET autoload_known_extensions = false")
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")
    return con


def run_duckdb(sql: str, lake: Path, snapshot: Snapshot = LATEST) -> pa.Table:
    """Run read-only Spark SQL over the lake's tables on an in-memory DuckDB."""
    tree = parse_query(sql)
    tables = {name: _wall_clock(table) for name, table in read_tables(tree, lake, snapshot).items()}
    duck_sql = to_duckdb_sql(tree, _schema(tables))
    check_bare_names(tree, [c for t in tables.values() for c in t.column_names])
    con = connect(tables)
    try:
        return _spark_types(con.sql(duck_sql).to_arrow_table())
    except duckdb.Error as err:
        first = first_line(err)
        # A name the query gets wrong, or a zero divisor, fails on Spark too: no hint to try it.
        misnamed = isinstance(err, duckdb.BinderException) and _MISNAMED.search(first)
        stops = (DIVIDE_BY_ZERO, REMAINDER_BY_ZERO, CAST_MALFORMED)
        same_on_spark = misnamed or any(z in first for z in stops)
        raise UserError(
            f"query: DuckDB: {first}" + ("" if same_on_spark else f" ({SPARK_HINT})")
        ) from None
    finally:
        con.close()
