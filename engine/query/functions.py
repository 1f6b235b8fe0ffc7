"""The functions a `query` may call: an allow-list, checked on the parsed SQL before any engine.

`query` is read-only on both engines. DuckDB loses file access once the tables are registered,
but Spark runs whatever the SQL calls: `reflect('java.io.File', 'createTempFile', ...)` makes a
file, `java_method('java.lang.System', 'getenv', 'HOME')` reads the environment. So every call
in a query must be on the list in `engine/definitions/spark_functions.txt` (Spark's built-in
functions minus those that reach the JVM, files, the network or the environment), by its plain
name; anything else is refused in one line naming it. Also refused: `TRANSFORM ... USING` (runs a
script), qualified names (`system.builtin.reflect`), and hints Spark does not define.

The check reads the SQL with the project's Spark dialect but with no known functions, so
every call by name stays an `exp.Anonymous` carrying the name as written: no function hides
behind a sqlglot class (sqlglot would parse `nvl` as `Coalesce`, `percentile_approx` as
`ApproxQuantile`). What sqlglot still builds as a class comes from syntax (CAST, EXTRACT, CASE,
RLIKE, CURRENT_USER, ...): `_SYNTAX` names the Spark function each stands for, and any other
class is refused. Behind the tree, a scan of the tokens refuses any refused name followed by
"(", in case a sqlglot quirk drops a call from the tree. A bare `user` naming no column is
refused once the tables are known (`check_bare_names`): Spark reads it as `user()`.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from functools import cache
from itertools import pairwise
from typing import Any, ClassVar

import sqlglot
from sqlglot import exp
from sqlglot.tokens import TokenType

from engine.definitions.spark_functions import not_a_function, spark_functions
from engine.errors import UserError, first_line
from engine.query.dialect import SparkQuery

__all__ = [
    "HINTS",
    "allowed_functions",
    "check_bare_names",
    "check_calls",
    "refused_functions",
]

_LIST = "the list: engine/definitions/spark_functions.txt"

# Spark's hints (ResolveHints): planner advice, they call nothing.
HINTS = frozenset(
    {
        "broadcast",
        "broadcastjoin",
        "mapjoin",
        "merge",
        "shuffle_merge",
        "mergejoin",
        "shuffle_hash",
        "shuffle_replicate_nl",
        "coalesce",
        "repartition",
        "repartition_by_range",
        "rebalance",
    }
)

# What sqlglot builds from syntax rather than from a name, even with no known functions: the
# Spark function each stands for (checked against the list like any call), or None for plain
# syntax (AND, CASE, EXISTS (subquery)). Any other class is refused.
_SYNTAX: Mapping[type[exp.Expr], str | None] = {
    exp.And: None,
    exp.Or: None,
    exp.Case: None,
    exp.Exists: None,
    exp.If: "if",
    exp.Cast: "cast",
    exp.TryCast: "cast",  # Spark's CAST and `::` (sqlglot: TryCast) and TRY_CAST
    exp.Collate: "collate",
    exp.RegexpLike: "rlike",
    exp.Transform: "transform",  # transform(array, x -> ...), not TRANSFORM ... USING
    exp.Extract: "extract",
    exp.Trim: "trim",
    exp.StrPosition: "position",
    exp.Substring: "substring",
    exp.Overlay: "overlay",
    exp.Ceil: "ceil",
    exp.Floor: "floor",
    exp.Chr: "chr",
    exp.Decode: "decode",
    exp.DecodeCase: "decode",
    exp.Initcap: "initcap",
    exp.ApproxQuantile: "percentile_approx",
    exp.Quantile: "percentile",
    exp.ArgMax: "max_by",
    exp.ArgMin: "min_by",
    exp.GroupConcat: "listagg",
    exp.CurrentDate: "current_date",
    exp.CurrentTimestamp: "current_timestamp",
    exp.CurrentUser: "current_user",
    exp.SessionUser: "session_user",
}


class _CallNames(SparkQuery):
    """`query`'s Spark dialect with no known functions: calls stay `exp.Anonymous`."""

    class Parser(SparkQuery.Parser):
        FUNCTIONS: ClassVar[dict[str, Any]] = {}
        # sqlglot reads `array(x)[0]` as Postgres' `ARRAY[0]` when `array(x)` is anonymous,
        # dropping `x` from the tree; Spark has no such constructor.
        ARRAY_CONSTRUCTORS: ClassVar[dict[str, Any]] = {}


@cache
def allowed_functions() -> frozenset[str]:
    """The names a query may call (lower case): Spark's built-ins not refused."""
    return frozenset(n for n, reason in spark_functions().items() if reason is None)


@cache
def refused_functions() -> Mapping[str, str]:
    """Spark functions a query may not call, with the reason."""
    return {n: reason for n, reason in spark_functions().items() if reason is not None}


def _refuse(name: str) -> UserError:
    reason = refused_functions().get(name)
    if reason is not None:
        return UserError(f"query: {name}() is not allowed: {reason} (query is read-only)")
    # The list holds every Spark built-in: any other name is none of Spark's.
    return UserError(f"query: {not_a_function(name, allowed_functions())} ({_LIST})")


def _call_name(node: exp.Func) -> str:
    """The Spark function a call node stands for, lower case."""
    if isinstance(node.parent, exp.Dot) and node.arg_key == "expression":
        qualified = node.parent.sql(dialect="spark").split("(")[0]
        raise UserError(f"query: {qualified}(): call functions by their plain name")
    if isinstance(node, exp.Anonymous | exp.AnonymousAggFunc):
        return node.name.lower()
    if type(node) not in _SYNTAX:
        raise UserError(f"query: {node.sql_name()} is not allowed in a query (query is read-only)")
    return _SYNTAX[type(node)] or ""


def _check_hint(hint: exp.Hint) -> None:
    for item in hint.expressions:
        if isinstance(item, exp.JoinHint):
            name = str(item.this)
        elif isinstance(item, exp.Anonymous | exp.Var):
            name = item.name
        else:
            name = item.sql(dialect="spark")
        if name.lower() not in HINTS:
            known = ", ".join(sorted(h.upper() for h in HINTS))
            raise UserError(f"query: hint {name}: not a Spark hint (hints: {known})")


def _backstop(sql: str) -> None:
    # Behind the allow-list, in case a sqlglot quirk drops a call from the tree (as it did
    # `array(reflect(...))[0]`): a refused name followed by "(" anywhere in the tokens.
    tokens = _CallNames().tokenize(sql)
    refused = refused_functions()
    for token, following in pairwise(tokens):
        if token.text.lower() in refused and following.token_type == TokenType.L_PAREN:
            raise _refuse(token.text.lower())


def check_calls(sql: str) -> None:
    """Refuse, in one line naming it, any call in `sql` that is not on the allow-list, and
    script transforms, qualified function names and unknown hints."""
    try:
        trees = [t for t in sqlglot.parse(sql, read=_CallNames) if t is not None]
    except sqlglot.errors.SqlglotError as err:
        raise UserError(f"query: {first_line(err)}") from None
    allowed = allowed_functions()
    for tree in trees:
        for node in tree.walk():
            if isinstance(node, exp.QueryTransform):
                raise UserError("query: TRANSFORM ... USING runs a script: not allowed (read-only)")
            if isinstance(node, exp.Hint):
                _check_hint(node)
            elif isinstance(node, exp.Func) and not (
                isinstance(node.parent, exp.Hint) and node.arg_key == "expressions"
            ):
                name = _call_name(node)
                if name and name not in allowed:
                    raise _refuse(name)
    _backstop(sql)


# Spark reads a bare `user` that names no column as the function `user()`; `current_user` and
# `session_user` parse as calls already.
_ACCOUNT = frozenset({"user", "current_user", "session_user"})


def check_bare_names(tree: exp.Query, columns: Collection[str]) -> None:
    """Refuse a bare `user` that is no column of the tables read (`columns`) or of the query
    itself: Spark would answer with the account it runs as."""
    defined = {c.lower() for c in columns}
    defined |= {a.alias.lower() for a in tree.find_all(exp.Alias)}
    defined |= {c.name.lower() for alias in tree.find_all(exp.TableAlias) for c in alias.columns}
    for column in tree.find_all(exp.Column):
        name = column.name.lower()
        if not column.table and name in _ACCOUNT and name not in defined:
            raise UserError(
                f"query: {column.name}: no such column, and Spark would read it as {name}(), "
                "the account it runs as (query is read-only)"
            )
