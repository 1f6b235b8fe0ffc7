"""Aggregates as Spark computes them: skewness and kurtosis of the population (DuckDB's are
the sample's), `percentile` between values and `percentile_approx` a value of the column (see
`quantiles`), and PIVOT cells without rows NULL for a count too (DuckDB's count gives 0)."""

from __future__ import annotations

from sqlglot import exp

from engine.errors import UserError
from engine.query.duckdb.sql import SPARK_HINT, duckdb_expr

__all__ = ["moments", "pivots", "quantiles"]


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
