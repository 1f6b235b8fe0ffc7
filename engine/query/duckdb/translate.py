"""Spark SQL to DuckDB SQL: sqlglot's translation, then the rewrites that make DuckDB compute
what Spark does, in an order that matters (a rewrite that writes its operands as text must
come after those that change them)."""

from __future__ import annotations

from collections.abc import Callable

import sqlglot
from sqlglot import exp

from engine.errors import UserError, first_line
from engine.query.duckdb import aggregates, arrays, names, numbers, text, times
from engine.query.duckdb.inferred import Schema, typed_twins
from engine.query.duckdb.sql import SPARK_HINT

__all__ = ["to_duckdb_sql"]


def _drop_hints(tree: exp.Expr) -> None:
    for hint in list(tree.find_all(exp.Hint)):
        hint.pop()  # Spark's planner hints (BROADCAST, REPARTITION, ...) mean nothing here


# Before the first that writes operands as text: the names read the query as written, and the
# windows, zones and `%`s must be Spark's inside any later rewrite's text.
_FIRST: tuple[Callable[[exp.Expr], None], ...] = (
    numbers.refuse_other_hashes,
    names.name_outputs,
    _drop_hints,
    times.count_days_like_spark,
    times.windows,
    times.unix_seconds,
    times.zones,
    times.formats,
    numbers.stop_at_zero,
)
_THEN: tuple[Callable[[exp.Expr], None], ...] = (
    numbers.casts,
    times.dates_like_spark,
    arrays.index_from_zero,
    numbers.logarithms,
    aggregates.moments,
    arrays.array_functions,
    text.like_escapes,
    text.substrings,
    text.format_strings,
    aggregates.pivots,
    arrays.lateral_views,
)


def to_duckdb_sql(tree: exp.Query, schema: Schema | None = None) -> str:
    """The DuckDB SQL for a parsed Spark SQL query; with the tables' `schema`, the rewrites
    that depend on an operand's type (a DOUBLE rounded or concatenated, a DATE minus a DATE)
    apply too."""
    tree = tree.copy()
    kinds = (exp.Round, exp.Sub, *text.CONCATENATIONS)
    twins = typed_twins(tree, schema or {}, kinds)  # the query as written
    rounded = numbers.rounds_of_doubles(twins[exp.Round])
    subtracted = times.date_differences(twins[exp.Sub])
    concatenated = [c for k in text.CONCATENATIONS for c in text.doubles_concatenated(twins[k])]
    for rewrite in _FIRST:
        rewrite(tree)
    # After the `/`s stop at zero (a rewrite that writes its operand as text) and before the
    # casts, which write theirs (and the text of a concatenated DOUBLE).
    for call in rounded:
        call.replace(numbers.round_half_up(call))
    for sub in subtracted:
        sub.replace(times.days_between(sub))
    text.cast_to_text(concatenated)
    for rewrite in _THEN:
        rewrite(tree)
    try:
        return tree.sql(dialect="duckdb", unsupported_level=sqlglot.ErrorLevel.RAISE)
    except sqlglot.errors.SqlglotError as err:
        raise UserError(
            f"query: cannot translate to DuckDB: {first_line(err)} ({SPARK_HINT})"
        ) from None
