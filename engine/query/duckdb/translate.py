"""Spark SQL to DuckDB SQL: sqlglot's translation, then the rewrites that make DuckDB compute
what Spark does, in one ordered list."""

from __future__ import annotations

from collections.abc import Callable

import sqlglot
from sqlglot import exp

from engine.errors import UserError, first_line
from engine.query.duckdb import aggregates, arrays, names, numbers, sessions, text, times
from engine.query.duckdb.inferred import Schema, mark_types
from engine.query.duckdb.sql import SPARK_HINT

__all__ = ["to_duckdb_sql"]


def _drop_hints(tree: exp.Expr) -> None:
    for hint in list(tree.find_all(exp.Hint)):
        hint.pop()  # Spark's planner hints (BROADCAST, REPARTITION, ...) mean nothing here


# The order matters where a rewrite reads the query as written (the outputs' names), or
# where one writes what another must see: a concatenated DOUBLE becomes a cast to text, which
# the casts then write as Spark does. A rewrite's own DuckDB SQL holds copies of its operands,
# which stay the query's nodes for the rewrites after it (`sql.duckdb_expr`).
_REWRITES: tuple[Callable[[exp.Expr], None], ...] = (
    numbers.refuse_other_hashes,
    names.name_outputs,
    names.name_inline_tables,
    names.grouped_windows,
    sessions.session_windows,
    _drop_hints,
    times.count_days_like_spark,
    times.windows,
    times.unix_seconds,
    times.epochs,
    times.zones,
    times.timestamp_diffs,
    times.try_to_dates,
    times.time_texts,
    times.formats,
    numbers.stop_at_zero,
    numbers.rounds_of_doubles,
    numbers.brounds,
    numbers.whole_numbers,
    numbers.signs,
    numbers.width_buckets,
    numbers.tried_arithmetic,
    times.dates_plus_days,
    times.dates_subtracted,
    text.numbers_concatenated,
    times.to_dates,
    numbers.casts,
    times.dates_like_spark,
    arrays.index_from_zero,
    arrays.indexes,
    numbers.logarithms,
    aggregates.truth_aggregates,
    aggregates.moments,
    aggregates.quantiles,
    aggregates.sums,
    arrays.array_functions,
    arrays.sequences,
    text.like_escapes,
    text.substrings,
    text.substring_indexes,
    text.format_numbers,
    text.format_strings,
    text.java_text,
    text.json_reads,
    text.regexp_replacements,
    text.regexp_substrings,
    aggregates.pivots,
    arrays.lateral_views,
)
# The nodes whose rewrite depends on their operands' types.
_TYPED = (
    exp.Round,
    exp.ToChar,
    exp.Anonymous,
    exp.Reverse,
    exp.Ceil,
    exp.Cast,
    exp.TryCast,
    exp.Floor,
    *numbers.TRIED,
    exp.Add,
    exp.Sub,
    exp.GenerateSeries,
    exp.Bracket,
    *text.CONCATENATIONS,
)


def to_duckdb_sql(tree: exp.Query, schema: Schema | None = None) -> str:
    """The DuckDB SQL for a parsed Spark SQL query; with the tables' `schema`, the rewrites
    that depend on an operand's type (a DOUBLE rounded or concatenated, a DATE minus a DATE or
    plus days, a sequence of dates, an array's index) apply too."""
    tree = tree.copy()
    mark_types(tree, schema or {}, _TYPED)  # on the query as written
    for rewrite in _REWRITES:
        rewrite(tree)
    try:
        return tree.sql(dialect="duckdb", unsupported_level=sqlglot.ErrorLevel.RAISE)
    except sqlglot.errors.SqlglotError as err:
        raise UserError(
            f"query: cannot translate to DuckDB: {first_line(err)} ({SPARK_HINT})"
        ) from None
