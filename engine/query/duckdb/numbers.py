"""Arithmetic, casts, hashes, logarithms and rounding as Spark computes them.

* `a / b`, `a % b` and `a div b` with `b` zero stop the query, as on Spark (ANSI, its default):
  sqlglot's `/` gives NULL (Spark's legacy mode), DuckDB's infinity, and DuckDB's `%` stops
  with advice that does not apply; `try_divide` and `try_mod` give NULL on both;
* `pmod(a, b)` (DuckDB has none) is Spark's: `a % b`, plus `b` when that is negative;
* `CAST` stops at a value it cannot take, as Spark's (ANSI) does, where sqlglot's TRY_CAST gives
  NULL; to an integer type (also `bigint(x)`, `tinyint(x)`, ...) a fraction is cut off, not
  rounded, and text must be a whole number; `try_cast` gives NULL there instead;
* a cast to DECIMAL without a precision is to DECIMAL(10, 0), and of a DOUBLE rounds its
  shortest decimal form half up, as `round` does;
* a DOUBLE or FLOAT cast to text is written as Java writes it, as Spark does: in decimals from
  0.001 up to 10,000,000 and as `1.0E10` outside (DuckDB: decimals up to 1e16, then `1e+16`);
* a TIMESTAMP cast to a number is its epoch seconds, a number cast to a TIMESTAMP that
  many epoch seconds (DuckDB has neither cast), where sqlglot can tell the operand's type;
* text cast to a DATE or TIMESTAMP must be in Spark's forms (`2024`, `2024-6`, `2024-06-01`
  and a time after a space or `T`), where DuckDB also read `2024/06/01`;
* `hash()` and `xxhash64()`, which DuckDB computes otherwise, are refused;
* a logarithm of a value (or base) not above 0 is NULL (DuckDB: -Infinity, or an error);
* `round` of a DOUBLE rounds its shortest decimal form half up (0.285 to 0.29; DuckDB rounds
  the binary value, 0.28), and `bround` half to even (0.295 to 0.3), where sqlglot can tell
  the type from the tables';
* `ceil` and `floor` of a DOUBLE or an integer are BIGINTs (DuckDB's are DOUBLEs);
* `nanvl`, `negative` and `positive` (DuckDB has none) are written in its SQL;
* `try_add`, `try_subtract` and `try_multiply` (DuckDB has none) of integers give NULL where
  the result overflows its type, where sqlglot can tell the operands' types.
"""

from __future__ import annotations

import sqlglot
from sqlglot import exp

from engine.errors import UserError
from engine.query.duckdb.inferred import TIMES, operand_type
from engine.query.duckdb.sql import SPARK_HINT, STOP, duckdb_expr, is_duckdb_own

__all__ = [
    "CAST_MALFORMED",
    "DIVIDE_BY_ZERO",
    "REMAINDER_BY_ZERO",
    "TRIED",
    "brounds",
    "casts",
    "logarithms",
    "refuse_other_hashes",
    "rounds_of_doubles",
    "signs",
    "stop_at_zero",
    "tried_arithmetic",
    "whole_numbers",
    "width_buckets",
]

DIVIDE_BY_ZERO = "division by zero (try_divide(a, b) gives NULL instead)"
REMAINDER_BY_ZERO = "remainder by zero (try_mod(a, b) gives NULL instead)"
CAST_MALFORMED = "because it is malformed (try_cast gives NULL instead)"


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
    stop = exp.Anonymous(this=STOP, expressions=[exp.Literal.string(said)])
    return exp.Case().when(zero, stop).else_(plain)


def _try_mod(call: exp.Anonymous) -> exp.Expr:
    """Spark's try_mod(a, b): NULL where `b` is zero (DuckDB has no such function)."""
    if len(call.expressions) != 2:
        return call
    return duckdb_expr("CASE WHEN __1 <> 0 THEN __0 % __1 END", *call.expressions)


def _pmod(call: exp.Anonymous) -> exp.Expr:
    """Spark's pmod(a, b) as Spark computes it, in `%`s that stop at a zero `b` as Spark's
    does (DuckDB has no pmod): `a % b`, plus `b` (then `% b` again) when it is negative."""
    if len(call.expressions) != 2:
        return call
    a, b = (f"({arg.sql(dialect='spark')})" for arg in call.expressions)
    return sqlglot.parse_one(
        f"CASE WHEN {a} % {b} < 0 THEN ({a} % {b} + {b}) % {b} ELSE {a} % {b} END", read="spark"
    )


def stop_at_zero(tree: exp.Expr) -> None:
    """pmod, then `/`, `%` and `div` stopping at a zero divisor, then try_mod."""
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


_TEXT = frozenset({exp.DataType.Type.TEXT, exp.DataType.Type.VARCHAR})
# The casts dispatch on DuckDB's type of their operand `__0` at run time, so that they hold
# where sqlglot cannot tell the type.
_FLOATING = "typeof(__0) IN ('DOUBLE', 'FLOAT')"
_INTEGRAL = frozenset(exp.DataType.Type[t] for t in ("TINYINT", "SMALLINT", "INT", "BIGINT"))
# Spark's casts written as calls that sqlglot leaves as calls (it reads int(x) as a CAST), and
# the type each casts to: decimal(x) is Spark's DECIMAL(10, 0), not DuckDB's DECIMAL(18, 3).
_CAST_CALLS = {
    "tinyint": "TINYINT",
    "smallint": "SMALLINT",
    "bigint": "BIGINT",
    "binary": "BINARY",
    "decimal": "DECIMAL(10, 0)",
}
# DuckDB has functions of these names that hash otherwise: a wrong number, quietly.
_OTHER_HASHES = frozenset({"hash", "xxhash64"})


def _as_java_writes() -> str:
    """DuckDB SQL for the text Spark (Java's Double.toString) writes for a DOUBLE or FLOAT `__0`:
    decimals for 0.001 <= |x| < 1e7, else `d.dddE<n>`, from DuckDB's shortest digits."""
    # DuckDB writes decimals from 1e-4 up to 1e16 (12345678.9, 0.0009), then 1e+16, 1.5e-05.
    s = "CAST(__0 AS VARCHAR)"
    as_java = r"'-?([1-9]\d{0,6}\.\d+|0\.0{0,2}[1-9]\d*|0\.0)'"
    mantissa = f"split_part({s}, 'e', 1)"
    # 12345678.9 is 1.23456789E7, 0.00012 is 1.2E-4 (below 0.001 DuckDB's decimals have 3 zeros)
    digits = rf"rtrim(regexp_replace({s}, '^(-?)(?:0\.000)?(\d)(\d*)\.?(\d*)$', '\1\2.\3\4'), '0')"
    unsigned = f"ltrim({s}, '-')"
    power = f"CASE WHEN starts_with({unsigned}, '0') THEN -4 ELSE strpos({unsigned}, '.') - 2 END"
    return (
        f"CASE {s} WHEN 'nan' THEN 'NaN' WHEN 'inf' THEN 'Infinity' "
        "WHEN '-inf' THEN '-Infinity' ELSE CASE "
        f"WHEN regexp_full_match({s}, {as_java}) THEN {s} "
        f"WHEN contains({s}, 'e') THEN {mantissa} "
        f"|| CASE WHEN contains({mantissa}, '.') THEN '' ELSE '.0' END "
        f"|| 'E' || CAST(CAST(split_part({s}, 'e', 2) AS INTEGER) AS VARCHAR) "
        f"ELSE {digits} || CASE WHEN ends_with({digits}, '.') THEN '0' ELSE '' END "
        f"|| 'E' || CAST({power} AS VARCHAR) END END"
    )


_JAVA_TEXT = _as_java_writes()


def _spark_text(x: exp.Expr) -> exp.Expr:
    """Spark's CAST of `x` to text: DuckDB's, but a DOUBLE or FLOAT as Java writes it, and a
    DECIMAL below 1 with its 0 (DuckDB wrote `.50` for a DECIMAL(2, 2))."""
    return duckdb_expr(
        f"CASE WHEN {_FLOATING} THEN {_JAVA_TEXT} WHEN typeof(__0) LIKE 'DECIMAL%' "
        r"THEN regexp_replace(CAST(__0 AS VARCHAR), '^(-?)\.', '\10.') "
        "ELSE CAST(__0 AS VARCHAR) END",
        x,
    )


def _conversion(*, safe: bool) -> str:
    """DuckDB's cast that gives NULL (try_cast) or stops (CAST) at a value it cannot take."""
    return "TRY_CAST" if safe else "CAST"


def _spark_decimal(cast: exp.Cast, *, safe: bool) -> exp.Expr:
    """Spark's cast to a DECIMAL: DECIMAL(10, 0) where no precision is given (DuckDB's is
    DECIMAL(18, 3)), and a DOUBLE rounded half up on its shortest decimal form (0.285 to 0.29;
    DuckDB rounds the binary value, 0.28), as `round` does."""
    to = cast.to.sql(dialect="duckdb") if cast.to.expressions else "DECIMAL(10, 0)"
    convert = _conversion(safe=safe)
    return duckdb_expr(
        f"CASE WHEN {_FLOATING} AND NOT isfinite(CAST(__0 AS DOUBLE)) THEN NULL "  # as Spark's
        f"WHEN {_FLOATING} THEN {convert}(CAST(__0 AS VARCHAR) AS {to}) "
        f"ELSE {convert}(__0 AS {to}) END",
        cast.this,
    )


def _malformed(cast: exp.Cast, *, safe: bool) -> str:
    """DuckDB SQL for what a cast gives for text `__0` it cannot read: NULL for try_cast, else
    a stop naming the value and the type, as Spark's."""
    if safe:
        return "NULL"
    head = exp.Literal.string("the value '").sql(dialect="duckdb")
    tail = f"' cannot be cast to {cast.to.sql(dialect='spark')} {CAST_MALFORMED}"
    tail = exp.Literal.string(tail).sql(dialect="duckdb")
    return f"{STOP}(concat({head}, CAST(__0 AS VARCHAR), {tail}))"


# Text as Spark reads it into a DATE or TIMESTAMP: trimmed, a year, then `-` month, then `-`
# day, then (after the day) ' ' or 'T' and anything; DuckDB also read '2024/06/01' and
# '2024 06 01', and not '2024' or '2024-06' (January, the first).
_TRIMMED = r"regexp_replace(CAST(__0 AS VARCHAR), '^\s+|\s+$', '', 'g')"
_DATE_FORMS = r"[+-]?\d{4,7}(-\d{1,2}(-\d{1,2}([ T].*)?)?)?"
# A time of day alone is today's on Spark: DuckDB's cast stops there, with the hint.
_TIMESTAMP_FORMS = _DATE_FORMS + r"|T?\d{1,2}:.*"
_YEAR_MONTH = f"regexp_extract({_TRIMMED}, '^[+-]?\\d+(-\\d{{1,2}})?$')"
_FIRST_DAY = (
    f"CASE WHEN {_YEAR_MONTH} = '' THEN NULL WHEN contains(ltrim({_YEAR_MONTH}, '+-'), '-') "
    f"THEN {_YEAR_MONTH} || '-01' ELSE {_YEAR_MONTH} || '-01-01' END"
)
_DAY = f"coalesce({_FIRST_DAY}, regexp_extract({_TRIMMED}, '^[+-]?\\d+-\\d{{1,2}}-\\d{{1,2}}'))"
_TIMESTAMPS = TIMES - {exp.DataType.Type.DATE}
# The common forms, which both read alike, cast at once (a third of the time of the checks).
_PLAIN_DATE = r"\d{4}-\d{2}-\d{2}"
_PLAIN_TIMESTAMP = _PLAIN_DATE + r"([ T]\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?)?"


def _spark_time(cast: exp.Cast, *, safe: bool) -> exp.Expr:
    """Spark's cast of text to a DATE or TIMESTAMP: its forms only (`_DATE_FORMS`), a year or a
    year and month the first day of it; what is no text is DuckDB's cast."""
    to = cast.to.sql(dialect="duckdb")
    convert = _conversion(safe=safe)
    date = cast.to.this == exp.DataType.Type.DATE
    read = _DAY if date else f"coalesce({_FIRST_DAY}, {_TRIMMED})"
    forms = _DATE_FORMS if date else _TIMESTAMP_FORMS
    plain = _PLAIN_DATE if date else _PLAIN_TIMESTAMP
    return duckdb_expr(
        f"CASE WHEN typeof(__0) = 'VARCHAR' THEN CASE "
        f"WHEN regexp_full_match(CAST(__0 AS VARCHAR), '{plain}') THEN {convert}(__0 AS {to}) "
        f"WHEN NOT regexp_full_match({_TRIMMED}, '{forms}') THEN {_malformed(cast, safe=safe)} "
        f"ELSE {convert}({read} AS {to}) END "
        f"ELSE {convert}(__0 AS {to}) END",
        cast.this,
    )


_NUMBERS = frozenset(
    {*_INTEGRAL, exp.DataType.Type.DOUBLE, exp.DataType.Type.FLOAT, exp.DataType.Type.DECIMAL}
)


def _epoch_cast(cast: exp.Cast, *, safe: bool) -> exp.Expr | None:
    """A time cast to an integer is its epoch seconds rounded down (to a DOUBLE with their
    fraction), a number cast to a TIMESTAMP that many epoch seconds, as on Spark (DuckDB has
    no such casts), where sqlglot could tell the operand's type; None for other casts."""
    kind = operand_type(cast, "this")
    convert = _conversion(safe=safe)
    to = cast.to.sql(dialect="duckdb")
    if kind in _TIMESTAMPS and cast.to.this in _INTEGRAL:
        return duckdb_expr(f"{convert}(floor(epoch(__0)) AS {to})", cast.this)
    if kind in _TIMESTAMPS and cast.to.this in (exp.DataType.Type.DOUBLE, exp.DataType.Type.FLOAT):
        return duckdb_expr(f"CAST(epoch(__0) AS {to})", cast.this)
    if kind in _NUMBERS and cast.to.this in _TIMESTAMPS:
        return duckdb_expr("to_timestamp(CAST(__0 AS DOUBLE))", cast.this)
    return None


def _spark_cast(cast: exp.Cast) -> exp.Expr:
    """Spark's CAST (ANSI, its default) or try_cast (`safe`) in DuckDB. A value CAST cannot
    take stops the query (sqlglot writes TRY_CAST, NULL). To an integer type, a fraction is cut
    off as Spark does (DuckDB rounds) and text must be a whole number (DuckDB takes '7.9', '1e3',
    '0x1A'); try_cast gives NULL where CAST stops."""
    safe = bool(cast.args.get("safe"))
    if (epoch := _epoch_cast(cast, safe=safe)) is not None:
        return epoch
    if cast.to.this in _TEXT and not cast.to.expressions:  # STRING, not VARCHAR(n)
        return _spark_text(cast.this)
    if cast.to.this == exp.DataType.Type.DECIMAL:
        return _spark_decimal(cast, safe=safe)
    if cast.to.this in TIMES:
        return _spark_time(cast, safe=safe)
    if cast.to.this not in _INTEGRAL:
        return cast if safe else exp.Cast(this=cast.this, to=cast.args["to"])
    to = cast.to.sql(dialect="duckdb")
    convert = _conversion(safe=safe)
    text = "CAST(__0 AS VARCHAR)"
    return duckdb_expr(
        f"CASE WHEN typeof(__0) = 'VARCHAR' THEN CASE "
        rf"WHEN NOT regexp_full_match({text}, '\s*[+-]?[0-9]+\s*') "
        f"THEN {_malformed(cast, safe=safe)} "
        f"ELSE {convert}(trim({text}) AS {to}) END "
        f"WHEN {_FLOATING} "
        f"THEN {convert}(trunc(CAST(__0 AS DOUBLE)) AS {to}) "
        f"WHEN typeof(__0) LIKE 'DECIMAL%' THEN {convert}(split_part({text}, '.', 1) AS {to}) "
        f"ELSE {convert}(__0 AS {to}) END",
        cast.this,
    )


def refuse_other_hashes(tree: exp.Expr) -> None:
    """A UserError for a hash DuckDB computes otherwise than Spark."""
    for call in tree.find_all(exp.Anonymous):
        if call.name.lower() in _OTHER_HASHES:
            raise UserError(
                f"query: {call.name.lower()}(): DuckDB's function of that name computes another "
                f"hash than Spark's ({SPARK_HINT})"
            )


def casts(tree: exp.Expr) -> None:
    """Casts written as calls, and all casts, as Spark's."""
    for call in list(tree.find_all(exp.Anonymous)):
        if call.name.lower() in _CAST_CALLS and len(call.expressions) == 1:
            to = exp.DataType.build(_CAST_CALLS[call.name.lower()], dialect="spark")
            call.replace(exp.Cast(this=call.expressions[0], to=to))  # as sqlglot does int(x)
    for cast in reversed(list(tree.find_all(exp.Cast))):  # innermost first: an outer one
        if not is_duckdb_own(cast):  # copies its operand
            cast.replace(_spark_cast(cast))


def _spark_log(call: exp.Ln | exp.Log) -> exp.Expr:
    """Spark's logarithms are NULL for a value (or base) not above 0; DuckDB's ln(0) is
    -Infinity and ln(-1) an error."""
    args = [call.this] if isinstance(call, exp.Ln) else [call.this, call.expression]
    bad = exp.or_(
        *(exp.LTE(this=exp.Paren(this=a.copy()), expression=exp.Literal.number(0)) for a in args)
    )
    return exp.Case().when(bad, exp.Null()).else_(call.copy())


def logarithms(tree: exp.Expr) -> None:
    """Logarithms NULL where Spark's are."""
    for log in reversed(list(tree.find_all(exp.Ln, exp.Log))):  # innermost first
        log.replace(_spark_log(log))


def _round_double(x: exp.Expr, places: exp.Expr | None, rounding: str) -> exp.Expr:
    """Spark's round (`round`, half up) or bround (`round_even`) of a DOUBLE: on its shortest
    decimal form (0.285 is 0.29), where DuckDB rounds the binary value (0.28499999999999998,
    so 0.28)."""
    # Past 1e17 a double has no fraction left to round; DECIMAL(38, 20) holds what is below.
    exact = f"CAST({rounding}(CAST(CAST(__0 AS VARCHAR) AS DECIMAL(38, 20)), __1) AS DOUBLE)"
    return duckdb_expr(
        f"CASE WHEN isfinite(__0) AND abs(__0) < 1e17 THEN {exact} ELSE {rounding}(__0, __1) END",
        x,
        places or exp.Literal.number(0),
    )


def rounds_of_doubles(tree: exp.Expr) -> None:
    """`round` of a DOUBLE as Spark's, where sqlglot could tell the operand's type."""
    for call in reversed(list(tree.find_all(exp.Round))):  # innermost first
        if operand_type(call, "this") == exp.DataType.Type.DOUBLE:
            call.replace(_round_double(call.this, call.args.get("decimals"), "round"))


def signs(tree: exp.Expr) -> None:
    """nanvl, negative and positive (DuckDB has none)."""
    for nanvl in reversed(list(tree.find_all(exp.Nanvl))):  # innermost first
        nanvl.replace(
            duckdb_expr("CASE WHEN isnan(__0) THEN __1 ELSE __0 END", nanvl.this, nanvl.expression)
        )
    for negative in reversed(list(tree.find_all(exp.Negative))):
        negative.replace(duckdb_expr("-__0", negative.this))
    for call in list(tree.find_all(exp.Anonymous)):
        if call.name.lower() == "positive" and len(call.expressions) == 1:
            call.replace(exp.Paren(this=call.expressions[0]))


# Spark's width_bucket(v, min, max, n) (DuckDB has none): bucket 1 to n of equal widths from
# min to max (or down from min when max is below it), 0 before them, n + 1 after; NULL for n
# below 1, equal bounds, a NaN or infinite bound, a NaN value.
_V, _LO, _HI, _N = (f"CAST(__{i} AS DOUBLE)" for i in range(4))
_WIDTH_BUCKET = (
    f"CASE WHEN __0 IS NULL OR __1 IS NULL OR __2 IS NULL OR __3 IS NULL OR __3 <= 0 "
    f"OR isnan({_V}) OR NOT isfinite({_LO}) OR NOT isfinite({_HI}) OR {_LO} = {_HI} THEN NULL "
    f"WHEN {_LO} < {_HI} THEN CASE WHEN {_V} < {_LO} THEN 0 WHEN {_V} >= {_HI} "
    f"THEN CAST(__3 AS BIGINT) + 1 ELSE CAST(trunc({_N} * ({_V} - {_LO}) / ({_HI} - {_LO})) "
    f"AS BIGINT) + 1 END "
    f"ELSE CASE WHEN {_V} > {_LO} THEN 0 WHEN {_V} <= {_HI} THEN CAST(__3 AS BIGINT) + 1 "
    f"ELSE CAST(trunc({_N} * ({_LO} - {_V}) / ({_LO} - {_HI})) AS BIGINT) + 1 END END"
)


def width_buckets(tree: exp.Expr) -> None:
    """Spark's width_bucket, written in DuckDB's SQL."""
    for call in reversed(list(tree.find_all(exp.WidthBucket))):  # innermost first
        operands = [call.args.get(a) for a in ("this", "min_value", "max_value", "num_buckets")]
        if all(o is not None for o in operands):
            call.replace(duckdb_expr(_WIDTH_BUCKET, *operands))


def whole_numbers(tree: exp.Expr) -> None:
    """ceil and floor of a DOUBLE, FLOAT or integer are BIGINTs, as Spark's (DuckDB's are
    DOUBLEs: 9.0 where Spark prints 9), where sqlglot could tell the operand's type."""
    kinds = {exp.DataType.Type.DOUBLE, exp.DataType.Type.FLOAT, *_INTEGRAL}
    for call in reversed(list(tree.find_all(exp.Ceil, exp.Floor))):  # innermost first
        if not call.args.get("decimals") and operand_type(call, "this") in kinds:
            name = "ceil" if isinstance(call, exp.Ceil) else "floor"
            call.replace(duckdb_expr(f"CAST({name}(__0) AS BIGINT)", call.this))


def brounds(tree: exp.Expr) -> None:
    """Spark's bround (DuckDB has none): half to even, as `round_even`, of a DOUBLE's shortest
    decimal form where sqlglot could tell the operand's type."""
    for call in reversed(list(tree.find_all(exp.Anonymous))):  # innermost first
        if call.name.lower() != "bround" or not 1 <= len(call.expressions) <= 2:
            continue
        x, *places = call.expressions
        if operand_type(call, "expressions") == exp.DataType.Type.DOUBLE:
            call.replace(_round_double(x, places[0] if places else None, "round_even"))
        else:
            # DuckDB's round_even takes its places always.
            digits = places[0] if places else exp.Literal.number(0)
            call.replace(exp.Anonymous(this="round_even", expressions=[x, digits]))


#: Spark's try_ arithmetic, each with the operator DuckDB computes it with.
TRIED = {exp.SafeAdd: "+", exp.SafeSubtract: "-", exp.SafeMultiply: "*"}


def _tried(call: exp.SafeAdd | exp.SafeSubtract | exp.SafeMultiply) -> exp.Expr:
    """Spark's try_add, try_subtract or try_multiply: NULL where the result of integers is past
    its type's range (DuckDB's operator stops there), computed as HUGEINTs first."""
    op = TRIED[type(call)]
    integral = (operand_type(call, "this"), operand_type(call, "expression"))
    if not all(kind in _INTEGRAL for kind in integral):
        return duckdb_expr(f"__0 {op} __1", call.this, call.expression)
    # DuckDB names the result's type when it binds the query, without computing it.
    top = (
        f"CASE typeof(__0 {op} __1) WHEN 'TINYINT' THEN 127 WHEN 'SMALLINT' THEN 32767 "
        "WHEN 'INTEGER' THEN 2147483647 ELSE 9223372036854775807 END"
    )
    wide = f"CAST(__0 AS HUGEINT) {op} CAST(__1 AS HUGEINT)"
    return duckdb_expr(
        f"CASE WHEN {wide} BETWEEN -({top}) - 1 AND {top} THEN __0 {op} __1 END",
        call.this,
        call.expression,
    )


def tried_arithmetic(tree: exp.Expr) -> None:
    """try_add, try_subtract and try_multiply (DuckDB has none); of integers NULL where the
    result overflows, where sqlglot could tell the operands' types (elsewhere DuckDB's operator,
    which stops)."""
    for call in reversed(list(tree.find_all(*TRIED))):  # innermost first
        call.replace(_tried(call))
