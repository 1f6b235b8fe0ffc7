"""Aggregates as Spark computes them: skewness and kurtosis of the population (DuckDB's are
the sample's), `percentile` between values and `percentile_approx` a value of the column (see
`quantiles`), PIVOT cells without rows NULL for a count too (DuckDB's count gives 0), and a
sum of integers past BIGINT's range stopping the query (`try_sum` NULL; DuckDB's HUGEINT sum
gave the number), and `every`, `some` and `any` as `bool_and` and `bool_or`."""

from __future__ import annotations

from sqlglot import exp

from engine.errors import UserError
from engine.query.duckdb.sql import SPARK_HINT, STOP, duckdb_expr, is_duckdb_own

__all__ = ["SUM_OVERFLOW", "moments", "pivots", "quantiles", "sums", "truth_aggregates"]

SUM_OVERFLOW = "the sum is past BIGINT's range (try_sum gives NULL instead)"


def _spark_moment(call: exp.Skewness | exp.Kurtosis) -> exp.Expr:
    """Spark's skewness and kurtosis are the population's (DuckDB's the sample's), NULL where
    the values do not vary; two values that do are symmetric (DuckDB: NULL under three)."""
    x = "__0"
    if isinstance(call, exp.Kurtosis):
        moment = f"kurtosis_pop({x})"
    else:
        n = f"count({x})"
        sample = f"skewness({x}) * ({n} - 2) / sqrt({n} * ({n} - 1))"
        moment = f"CASE WHEN {n} = 2 THEN 0.0 ELSE {sample} END"
    return duckdb_expr(f"CASE WHEN min({x}) = max({x}) THEN NULL ELSE {moment} END", call.this)


def truth_aggregates(tree: exp.Expr) -> None:
    """Spark's `every` is `bool_and`, `some` and `any` are `bool_or` (DuckDB has no `every`;
    sqlglot wrote `some` as the subquery's SOME and read `any(x)` as the quantifier ANY)."""
    for call in list(tree.find_all(exp.Anonymous, exp.Any)):
        if isinstance(call, exp.Any):
            quantifier = isinstance(call.parent, exp.Binary | exp.Predicate)  # x = ANY (...)
            if not quantifier:
                call.replace(exp.LogicalOr(this=call.this.unnest()))
        elif call.name.lower() in ("every", "some") and len(call.expressions) == 1:
            truth = exp.LogicalAnd if call.name.lower() == "every" else exp.LogicalOr
            call.replace(truth(this=call.expressions[0]))


def moments(tree: exp.Expr) -> None:
    """skewness and kurtosis of the population."""
    for moment in list(tree.find_all(exp.Skewness, exp.Kurtosis)):
        moment.replace(_spark_moment(moment))


def _spark_quantile(call: exp.Quantile | exp.ApproxQuantile) -> exp.Expr:
    """Spark's percentile: a DOUBLE between the two values nearest (sqlglot's QUANTILE is
    DuckDB's discrete one, 2 for the median of 1 to 4 where Spark says 2.5); its
    percentile_approx: the smallest value with that share of the column at or below it
    (DuckDB's approx_quantile comes between values: 1.5 for 1.0)."""
    many = isinstance(call.args["quantile"], exp.Array)
    if isinstance(call, exp.ApproxQuantile):
        return duckdb_expr("quantile_disc(__0, __1)", call.this, call.args["quantile"])
    double = "DOUBLE[]" if many else "DOUBLE"
    return duckdb_expr(
        f"CAST(quantile_cont(__0, __1) AS {double})", call.this, call.args["quantile"]
    )


def quantiles(tree: exp.Expr) -> None:
    """percentile and percentile_approx as Spark's."""
    for call in list(tree.find_all(exp.Quantile, exp.ApproxQuantile)):
        call.replace(_spark_quantile(call))


def _sum_of_ones(counted: exp.Expr) -> exp.Expr | None:
    """A count as a sum of ones, NULL over no rows as Spark's pivot cell is; None for what is
    not a count."""
    if isinstance(counted, exp.CountIf):
        ones = exp.If(this=counted.this.copy(), true=exp.Literal.number(1))
    elif isinstance(counted, exp.Count) and isinstance(counted.this, exp.Star):
        return exp.Sum(this=exp.Literal.number(1))
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
        return None
    ones.set("false", exp.Literal.number(0))
    return exp.Sum(this=ones)


def pivots(tree: exp.Expr) -> None:
    """PIVOTs as Spark's: a cell without rows is NULL whatever the aggregate (DuckDB allows one
    aggregate a cell, so a count becomes a sum of ones); a lone aggregate's alias names no
    column (DuckDB's were `www_n`, Spark's `www`)."""
    for pivot in list(tree.find_all(exp.Pivot)):
        if pivot.args.get("unpivot"):
            continue
        if len(pivot.expressions) == 1 and isinstance(pivot.expressions[0], exp.Alias):
            pivot.expressions[0].replace(pivot.expressions[0].this)
        for aggregate in pivot.expressions:
            counted = aggregate.this if isinstance(aggregate, exp.Alias) else aggregate
            if (summed := _sum_of_ones(counted)) is not None:
                counted.replace(summed)


# A sum of integers, `__0`, past BIGINT's range; DuckDB sums integers as HUGEINTs.
_PAST_BIGINT = (
    "typeof(__0) = 'HUGEINT' AND __0 NOT BETWEEN -9223372036854775808 AND 9223372036854775807"
)


def _whole_call(aggregate: exp.Expr) -> exp.Expr:
    """The aggregate with its FILTER and OVER clauses, which go with it."""
    while isinstance(aggregate.parent, exp.Filter | exp.Window) and aggregate.arg_key == "this":
        aggregate = aggregate.parent
    return aggregate


def sums(tree: exp.Expr) -> None:
    """A sum of integers past BIGINT's range stops the query, as Spark's does (ANSI), where
    DuckDB's HUGEINT gave the number; `try_sum` gives NULL there, `try_avg` is `avg`. The
    total is checked, not each step, so a sum that passes the range on the way and comes back
    stops on Spark only. A PIVOT's cells are left as they are (DuckDB takes a bare aggregate
    there)."""
    for total in reversed(list(tree.find_all(exp.Sum))):  # innermost first
        if not total.find_ancestor(exp.Pivot) and not is_duckdb_own(total):
            _guard(total, f"{STOP}({exp.Literal.string(SUM_OVERFLOW).sql(dialect='duckdb')})")
    # after the above, whose Sums these are not
    for call in reversed(list(tree.find_all(exp.Anonymous))):
        name = call.name.lower()
        if name == "try_avg" and len(call.expressions) == 1:
            call.replace(exp.Avg(this=call.expressions[0]))
        elif name == "try_sum" and len(call.expressions) == 1:
            total = exp.Sum(this=call.expressions[0])
            call.replace(total)
            _guard(total, "NULL")


def _guard(total: exp.Sum, past: str) -> None:
    """`total` (with its FILTER and OVER clauses) as `past` where it is past BIGINT's range."""
    whole = _whole_call(total)
    whole.replace(duckdb_expr(f"CASE WHEN {_PAST_BIGINT} THEN {past} ELSE __0 END", whole))
