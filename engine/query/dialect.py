"""Spark SQL as `query` reads it: the pipelines' dialect, with date patterns kept as written and
truncation units Spark does not know read as Spark answers them."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from sqlglot import exp

from engine.definitions.sql import SparkStreaming

__all__ = ["SparkQuery"]

# The units Spark's `trunc(date, unit)` knows, in any case; `date_trunc` knows the day and below.
_TRUNC_UNITS = frozenset({"YEAR", "YYYY", "YY", "QUARTER", "MONTH", "MM", "MON", "WEEK"})
_DATE_TRUNC_UNITS = _TRUNC_UNITS | {
    "DAY",
    "DD",
    "HOUR",
    "MINUTE",
    "SECOND",
    "MILLISECOND",
    "MICROSECOND",
}


def _null_unless_known(
    build: Callable[[list[exp.Expr]], exp.Expr],
    unit_at: int,
    units: frozenset[str],
    kind: exp.DataType.Type,
) -> Callable[[list[exp.Expr]], exp.Expr]:
    """A function builder that makes the call a NULL of `kind` when its unit is text Spark does
    not know: sqlglot reads 'Q', 'W', 'D' ... as QUARTER, WEEK, DAY, where Spark gives NULL."""

    def parse(args: list[exp.Expr]) -> exp.Expr:
        unit = args[unit_at] if len(args) > unit_at else None
        if isinstance(unit, exp.Literal) and unit.is_string and unit.name.upper() not in units:
            return exp.cast(exp.null(), kind)
        return build(args)

    return parse


class SparkQuery(SparkStreaming):
    """Date patterns (`date_format(ts, 'yyyy-MM-dd')`) stay Spark's text: sqlglot's own mapping
    to DuckDB's codes leaves the letters it lacks (`DDD`, `yyy`, `LLL`, `k`) as text, which
    DuckDB then prints as they are; the DuckDB translation maps them itself."""

    TIME_MAPPING: ClassVar[dict[str, str]] = {}

    class Parser(SparkStreaming.Parser):
        FUNCTIONS: ClassVar[dict[str, Callable]] = {
            **SparkStreaming.Parser.FUNCTIONS,
            "TRUNC": _null_unless_known(
                SparkStreaming.Parser.FUNCTIONS["TRUNC"], 1, _TRUNC_UNITS, exp.DataType.Type.DATE
            ),
            "DATE_TRUNC": _null_unless_known(
                SparkStreaming.Parser.FUNCTIONS["DATE_TRUNC"],
                0,
                _DATE_TRUNC_UNITS,
                exp.DataType.Type.TIMESTAMP,
            ),
        }
