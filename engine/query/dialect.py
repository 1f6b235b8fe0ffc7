"""Spark SQL as `query` reads it: the pipelines' dialect, with date patterns kept as written,
truncation units Spark does not know read as Spark answers them, and `TABLE t` as a query."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

import sqlglot
from sqlglot import exp
from sqlglot.tokens import Token, TokenType

from engine.definitions.sql import SparkStreaming

__all__ = ["SparkQuery", "decommented"]

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


# The tokens after which a query may begin (or nothing: the statement's start).
_QUERY_STARTS_AFTER = (
    None,
    TokenType.L_PAREN,
    TokenType.SEMICOLON,
    TokenType.UNION,
    TokenType.INTERSECT,
    TokenType.EXCEPT,
    TokenType.ALL,
    TokenType.DISTINCT,
)


class SparkQuery(SparkStreaming):
    """Date patterns (`date_format(ts, 'yyyy-MM-dd')`) stay Spark's text: sqlglot's own mapping
    to DuckDB's codes leaves the letters it lacks (`DDD`, `yyy`, `LLL`, `k`) as text, which
    DuckDB then prints as they are; the DuckDB translation maps them itself."""

    TIME_MAPPING: ClassVar[dict[str, str]] = {}

    class Parser(SparkStreaming.Parser):
        def parse(self, raw_tokens: list[Token], sql: str | None = None) -> list[exp.Expr | None]:
            # Spark's `TABLE t` where a query may start is `SELECT * FROM t`; sqlglot read a
            # column named TABLE aliased t. Not after CREATE, DROP, DESCRIBE ...: those are
            # statements that are refused or answered from the logs.
            tokens: list[Token] = []
            for token, following in zip(raw_tokens, [*raw_tokens[1:], None], strict=True):
                before = tokens[-1].token_type if tokens else None
                if (
                    token.token_type == TokenType.TABLE
                    and following is not None
                    and following.token_type in (TokenType.VAR, TokenType.IDENTIFIER)
                    and before in _QUERY_STARTS_AFTER
                ):
                    at = (token.line, token.col, token.start, token.end)
                    tokens += [
                        Token(TokenType.SELECT, "SELECT", *at, comments=token.comments),
                        Token(TokenType.STAR, "*", *at),
                        Token(TokenType.FROM, "FROM", *at),
                    ]
                else:
                    tokens.append(token)
            return super().parse(tokens, sql)

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


class _Statements(SparkQuery.Tokenizer):
    # sqlglot reads SHOW, DESCRIBE ... as a command whose rest is one opaque string, comments
    # and all; here every word is a token.
    COMMANDS: ClassVar[set[TokenType]] = set()


def decommented(sql: str) -> str:
    """`sql` without its comments (a space where one was), for the statements matched as text
    (SHOW, DESCRIBE, EXPLAIN); `sql` itself if it does not tokenize."""
    try:
        tokens = _Statements().tokenize(sql)
    except sqlglot.errors.TokenError:
        return sql
    text, end = [], 0
    for token in tokens:
        gap = sql[end : token.start]
        text += [" " if gap.strip() else gap, sql[token.start : token.end + 1]]
        end = token.end + 1
    return "".join(text).strip()
