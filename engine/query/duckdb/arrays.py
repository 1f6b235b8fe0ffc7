"""Arrays as Spark has them, and LATERAL VIEW.

* in `filter(a, (x, i) -> ...)` and `transform(a, (x, i) -> ...)` the index counts from 0
  (DuckDB's from 1);
* `array_distinct`, `array_intersect`, `array_except`, `array_union`, `array_remove`,
  `array_position`, `array_contains`, `flatten`, `exists`, `forall` and `array_repeat` are
  Spark's (`_SPARK_ARRAYS`), `zip_with` (which DuckDB lacks) is written in its SQL,
  `map_contains_key` reads its map and key the right way round, and `reverse` of an array is
  `list_reverse` (DuckDB's reverse takes text only);
* an index past an array's end (`a[5]`, `element_at(a, 6)`) stops the query, as Spark's
  (ANSI) does (DuckDB's is NULL, as Spark's `get` and `try_element_at` are);
* `sequence(a, b)` counts down when `b` is below `a` (DuckDB's was empty), by a day between
  dates or times, and is DATEs from DATEs (DuckDB's are times); a step away from `b` stops the
  query, as on Spark (DuckDB's was empty);
* `LATERAL VIEW [OUTER] explode(...)` is `CROSS JOIN UNNEST` (`LEFT JOIN ... ON TRUE` when
  OUTER, keeping rows with an empty or NULL array as Spark does), and `posexplode` a join of
  the elements with their places from 0 (DuckDB put the elements in the place column).
"""

from __future__ import annotations

from sqlglot import exp

from engine.query.duckdb.inferred import TIMES, operand_type
from engine.query.duckdb.sql import STOP, duckdb_expr, is_duckdb_own

__all__ = [
    "OUT_OF_BOUNDS",
    "SEQUENCE_BOUNDARIES",
    "array_functions",
    "index_from_zero",
    "indexes",
    "lateral_views",
    "sequences",
]

OUT_OF_BOUNDS = "is out of bounds"
SEQUENCE_BOUNDARIES = "Illegal sequence boundaries"


def index_from_zero(tree: exp.Expr) -> None:
    """Spark's `filter(a, (x, i) -> ...)` and `transform(a, (x, i) -> ...)` count `i` from 0,
    DuckDB's lambdas from 1: the body reads `i - 1` where Spark's reads `i`."""
    for call in list(tree.find_all(exp.ArrayFilter, exp.Transform)):
        lam = call.expression
        if not isinstance(lam, exp.Lambda) or len(lam.expressions) != 2:
            continue
        index = lam.expressions[1].name
        for name in list(lam.this.find_all(exp.Identifier)):
            if name.name == index and not isinstance(name.parent, exp.Lambda):
                one_less = exp.Sub(this=name.copy(), expression=exp.Literal.number(1))
                name.replace(exp.Paren(this=one_less))


# Spark's array functions whose DuckDB namesakes differ, as DuckDB SQL over their arguments
# __0, __1: Spark keeps each value's first place and NULLs (DuckDB's set functions sort by hash
# and drop NULLs), finds a NULL in an array as "maybe" (NULL), and counts a missing position as
# 0. The lambdas' names stay clear of the arguments' columns.
_FIRST = "list_position(__0, __e) = __i"
_EACH = "list_transform(__0, __1)"  # the lambda __1 on each element
_SOME_NULL = f"list_bool_or(list_transform({_EACH}, lambda __e: __e IS NULL))"
_SPARK_ARRAYS: dict[type[exp.Expr] | str, str] = {
    exp.ArrayDistinct: f"list_filter(__0, lambda __e, __i: {_FIRST})",
    exp.ArrayIntersect: "CASE WHEN __1 IS NULL THEN NULL ELSE list_filter(__0, lambda __e, __i: "
    f"{_FIRST} AND list_position(__1, __e) IS NOT NULL) END",
    exp.ArrayExcept: "CASE WHEN __1 IS NULL THEN NULL ELSE list_filter(__0, lambda __e, __i: "
    f"{_FIRST} AND list_position(__1, __e) IS NULL) END",
    "array_union": "CASE WHEN __0 IS NULL OR __1 IS NULL THEN NULL ELSE list_filter("
    "list_concat(__0, __1), lambda __e, __i: list_position(list_concat(__0, __1), __e) = __i) END",
    exp.ArrayRemove: "CASE WHEN __1 IS NULL THEN NULL "
    "ELSE list_filter(__0, lambda __e: __e IS NULL OR __e <> __1) END",
    exp.ArrayPosition: "CASE WHEN __1 IS NULL THEN NULL ELSE coalesce(list_position(__0, __1), "
    "CASE WHEN __0 IS NOT NULL THEN 0 END) END",
    exp.ArrayContains: "CASE WHEN __1 IS NULL THEN NULL WHEN list_contains(__0, __1) THEN true "
    "WHEN list_position(__0, NULL) IS NOT NULL THEN NULL ELSE list_contains(__0, __1) END",
    exp.Flatten: "CASE WHEN list_position(__0, NULL) IS NOT NULL THEN NULL ELSE flatten(__0) END",
    # three-valued, as Spark's: true when the lambda is for some element, else NULL when it is
    # NULL for some (DuckDB has no `forall`, and sqlglot dropped `exists`'s lambda)
    exp.Exists: f"CASE WHEN __0 IS NULL THEN NULL WHEN list_bool_or({_EACH}) THEN true "
    f"WHEN {_SOME_NULL} THEN NULL ELSE false END",
    # DuckDB has no array_repeat; a count below 1 gives [] on both
    "array_repeat": "CASE WHEN __1 IS NULL THEN NULL ELSE repeat([__0], CAST(__1 AS BIGINT)) END",
    "forall": f"CASE WHEN __0 IS NULL THEN NULL WHEN list_bool_or(list_transform({_EACH}, "
    f"lambda __e: NOT __e)) THEN false WHEN {_SOME_NULL} THEN NULL ELSE true END",
}


def _spark_array(call: exp.Expr) -> exp.Expr:
    """`call` as Spark computes it, by its template in `_SPARK_ARRAYS`, or as it was."""
    name = call.name.lower() if isinstance(call, exp.Anonymous) else type(call)
    if name not in _SPARK_ARRAYS or (name is exp.Exists and not call.args.get("expression")):
        return call  # `EXISTS (SELECT ...)` is not the array function
    if isinstance(call, exp.Anonymous | exp.ArrayIntersect):
        args = call.expressions
    else:
        args = [a for a in (call.this, call.args.get("expression")) if a is not None]
    return duckdb_expr(_SPARK_ARRAYS[name], *args)


def _rebound(name: exp.Identifier, body: exp.Expr) -> bool:
    """Whether `name` is not the outer lambda's parameter: a field's name (`x.price`), or a
    name a lambda inside `body` binds anew (or its place in that lambda's parameters)."""
    if isinstance(name.parent, exp.Dot) and name.parent.expression is name:
        return True
    node: exp.Expr | None = name.parent
    while node is not None and node is not body:
        if isinstance(node, exp.Lambda) and any(p.name == name.name for p in node.expressions):
            return True
        node = node.parent
    return False


def _zip_with(call: exp.Anonymous) -> exp.Expr | None:
    """Spark's `zip_with(a, b, (x, y) -> ...)` (DuckDB has none): the lambda over the elements
    at each place, the shorter array read as NULLs past its end; NULL if either is NULL."""
    left, right, lam = call.expressions
    if not isinstance(lam, exp.Lambda) or len(lam.expressions) != 2:
        return None
    body = exp.Paren(this=lam.this.copy())  # a parent for a body that is a name alone
    for name, array in zip(lam.expressions, (left, right), strict=True):
        for ident in list(body.find_all(exp.Identifier)):
            if ident.name == name.name and not _rebound(ident, body):
                column = ident.parent if isinstance(ident.parent, exp.Column) else None
                element = duckdb_expr("list_extract(__0, __zi)", array)
                (column if column is not None and column.this is ident else ident).replace(element)
    zipped = (
        "CASE WHEN __0 IS NULL OR __1 IS NULL THEN NULL ELSE list_transform("
        "range(1, greatest(len(__0), len(__1)) + 1), lambda __zi: __2) END"
    )
    return duckdb_expr(zipped, left, right, body)


def array_functions(tree: exp.Expr) -> None:
    """The functions of `_SPARK_ARRAYS` as Spark computes them, and `reverse` of an array where
    sqlglot could tell the operand's type."""
    for call in reversed(list(tree.find_all(exp.Func))):  # innermost first
        if isinstance(call, exp.Reverse) and operand_type(call, "this") == exp.DataType.Type.ARRAY:
            call.replace(duckdb_expr("list_reverse(__0)", call.this))
        elif isinstance(call, exp.Anonymous) and call.name.lower() == "zip_with":
            if len(call.expressions) == 3 and (zipped := _zip_with(call)) is not None:
                call.replace(zipped)
        elif isinstance(call, exp.MapContainsKey):  # sqlglot's DuckDB SQL swapped the two
            call.replace(
                duckdb_expr("list_contains(map_keys(__0), __1)", call.this, call.args["key"])
            )
        elif (spark := _spark_array(call)) is not call:
            call.replace(spark)


def _spark_sequence(call: exp.GenerateSeries) -> exp.Expr:
    """Spark's `sequence(start, stop[, step])`: the step is 1 (or a day between dates or times)
    towards `stop` unless given; a step away from it stops the query; DATEs give DATEs."""
    kind = operand_type(call, "start")
    times = kind in TIMES
    start, stop = ("CAST(__0 AS TIMESTAMP)", "CAST(__1 AS TIMESTAMP)") if times else ("__0", "__1")
    step = call.args.get("step")
    one = "to_days(1)" if times else "1"
    towards = f"CASE WHEN __0 <= __1 THEN {one} ELSE -{one} END"
    series = f"generate_series({start}, {stop}, {'__2' if step else towards})"
    if kind == exp.DataType.Type.DATE:
        series = f"list_transform({series}, lambda __t: CAST(__t AS DATE))"
    said = f"'{SEQUENCE_BOUNDARIES}: ' || __0 || ' to ' || __1 || ' by ' || __2"
    if step is not None:  # Spark's never is empty: its first is `start`
        series = f"CASE WHEN len({series}) = 0 THEN {STOP}({said}) ELSE {series} END"
    operands = [call.args["start"], call.args["end"], *([step] if step is not None else [])]
    return duckdb_expr(series, *operands)


def sequences(tree: exp.Expr) -> None:
    """`sequence` as Spark's; between dates or times where sqlglot could tell the type."""
    for call in reversed(list(tree.find_all(exp.GenerateSeries))):  # innermost first
        if not is_duckdb_own(call):  # a rewrite's own `range` is DuckDB's
            call.replace(_spark_sequence(call))


def _past_the_end(safe_call: str) -> str:
    return (
        f"{STOP}('the index ' || __1 || ' {OUT_OF_BOUNDS}: the array has ' || len(__0) || "
        f"' elements ({safe_call} gives NULL instead)')"
    )


# `a[i]` counts from 0, `element_at(a, i)` from 1 and back from the end for a negative i.
_FROM_ZERO = (
    f"CASE WHEN __1 < 0 OR __1 >= len(__0) THEN {_past_the_end('get(a, i)')} ELSE __0[__1 + 1] END"
)
_FROM_ONE = (
    f"CASE WHEN __1 = 0 THEN {STOP}('the index 0 {OUT_OF_BOUNDS}: element_at counts from 1') "
    f"WHEN abs(__1) > len(__0) THEN {_past_the_end('try_element_at(a, i)')} ELSE __0[__1] END"
)


def indexes(tree: exp.Expr) -> None:
    """An index past an array's end stops the query, as on Spark; `get(a, i)` gives NULL."""
    for call in list(tree.find_all(exp.Anonymous)):
        if call.name.lower() == "get" and len(call.expressions) == 2:
            call.replace(duckdb_expr("CASE WHEN __1 >= 0 THEN __0[__1 + 1] END", *call.expressions))
    for bracket in reversed(list(tree.find_all(exp.Bracket))):  # innermost first
        array = operand_type(bracket, "this") == exp.DataType.Type.ARRAY
        one_index = len(bracket.expressions) == 1
        if not array or not one_index or is_duckdb_own(bracket) or bracket.args.get("safe"):
            continue
        template = _FROM_ONE if bracket.args.get("offset") == 1 else _FROM_ZERO
        bracket.replace(duckdb_expr(template, bracket.this, bracket.expressions[0]))


def _positions(lateral: exp.Lateral) -> exp.Expr:
    """posexplode(a) as a subquery of each element with its place from 0, its columns named as
    the view names them (`pos` and `col` unless named)."""
    alias = lateral.args.get("alias")
    names = [c.name for c in alias.columns] if alias and alias.columns else []
    pos, col = (exp.to_identifier(n).sql(dialect="duckdb") for n in (names or ["pos", "col"]))
    rows = duckdb_expr(
        f"(SELECT unnest(generate_series(0, len(__0) - 1)) AS {pos}, unnest(__0) AS {col})",
        lateral.this.this,
    )
    name = alias.this if alias and alias.this else None
    return exp.Subquery(this=rows.this, alias=name and exp.TableAlias(this=name.copy()))


def lateral_views(tree: exp.Expr) -> None:
    """LATERAL VIEW [OUTER] explode(a) t AS x  ->  CROSS|LEFT JOIN UNNEST(a) AS t(x) [ON TRUE];
    posexplode(a) t AS pos, x joins a subquery of the elements with their places."""
    for select in list(tree.find_all(exp.Select)):
        for lateral in list(select.args.get("laterals") or []):
            if not lateral.args.get("view") or not isinstance(lateral.this, exp.Explode):
                continue
            alias = lateral.args.get("alias")
            if isinstance(lateral.this, exp.Posexplode):
                unnest = _positions(lateral)
            else:
                unnest = exp.Unnest(
                    expressions=[lateral.this.this.copy()], alias=alias and alias.copy()
                )
            outer = bool(lateral.args.get("outer"))
            join = exp.Join(
                this=unnest,
                kind=None if outer else "CROSS",
                side="LEFT" if outer else None,
                on=exp.true() if outer else None,
            )
            lateral.pop()
            select.append("joins", join)
