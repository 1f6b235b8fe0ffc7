"""sqlglot's syntax errors in the words of the SQL they are about, and where they are."""

from __future__ import annotations

import logging
import re
from typing import NamedTuple

import sqlglot
from sqlglot import exp
from sqlglot.dialects.dialect import DialectType
from sqlglot.errors import ParseError, SqlglotError
from sqlglot.tokens import TokenType

__all__ = ["SyntaxProblem", "incomplete", "parse_statements", "syntax_problem"]

# sqlglot names the token it stopped at by its repr and a missing part by its Python class.
_TOKEN = re.compile(r"<Token token_type: TokenType\.(\w+), text: (.*?), line: \d+, col: \d+, .*?>")
_CLASS = re.compile(r"<class 'sqlglot\.expressions\.(?:\w+\.)*(\w+)'>")
_END = {"SENTINEL", "EOF"}
# "Required keyword: 'this' missing for GT": sqlglot's names for a clause's or operator's parts.
_MISSING = re.compile(r"Required keyword: '(\w+)' missing for (\w+)")
_PARTS = {"this": "what comes after it", "expression": "what comes after it"}
_OPERATORS = {
    "EQ": "=", "NEQ": "!=", "GT": ">", "GTE": ">=", "LT": "<", "LTE": "<=",
    "ADD": "+", "SUB": "-", "MUL": "*", "DIV": "/", "MOD": "%",
}  # fmt: skip


# What may not follow a comma: sqlglot lets `SELECT a,, b`, `SELECT a, FROM t` and `FROM t,`
# pass, where Spark stops.
_AFTER_NO_COMMA = {
    TokenType.COMMA,
    TokenType.FROM,
    TokenType.WHERE,
    TokenType.GROUP_BY,
    TokenType.HAVING,
    TokenType.ORDER_BY,
    TokenType.LIMIT,
    TokenType.R_PAREN,
    TokenType.SEMICOLON,
}


class SyntaxProblem(NamedTuple):
    """A message a SQL author can read, and its line and column when sqlglot knows them."""

    message: str
    line: int | None = None
    col: int | None = None


def syntax_problem(error: SqlglotError) -> SyntaxProblem:
    """The first problem sqlglot reports, with its token and class names made readable."""
    first = error.errors[0] if isinstance(error, ParseError) and error.errors else {}
    message = str(first.get("description") or error).splitlines()[0]
    message = _TOKEN.sub(_token_text, message)
    message = _CLASS.sub(lambda m: m.group(1).upper(), message)
    message = _MISSING.sub(_missing_part, message)
    return SyntaxProblem(message, first.get("line"), first.get("col"))


def _missing_part(found: re.Match[str]) -> str:
    part, owner = found.groups()
    owner = _OPERATORS.get(owner.upper(), owner.upper())
    return f"{owner} is missing {_PARTS.get(part, f'its {part}')}"


def _token_text(found: re.Match[str]) -> str:
    kind, text = found.groups()
    return "the end of the text" if kind in _END else repr(text)


def parse_statements(sql: str, dialect: DialectType) -> list[exp.Expr]:
    """The statements of `sql` (a SqlglotError if it does not parse), without the warning
    sqlglot prints on stderr when it falls back to an opaque Command: the caller says what is
    wrong, in one line."""
    log = logging.getLogger("sqlglot")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        return [tree for tree in sqlglot.parse(sql, read=dialect) if tree is not None]
    except SqlglotError:
        raise
    except Exception as err:  # sqlglot's own fault on a form it half knows: said, not a crash
        raise ParseError(
            f"sqlglot, which reads the SQL here, failed on it ({type(err).__name__}: {err}); "
            "write it another way"
        ) from err
    finally:
        log.setLevel(level)


def incomplete(sql: str, tree: exp.Expr, dialect: DialectType) -> SyntaxProblem | None:
    """A clause sqlglot read as empty where Spark stops (`SELECT FROM t`, a comma with nothing
    after it, `GROUP BY` alone), or None."""
    tokens = sqlglot.Dialect.get_or_raise(dialect).tokenize(sql)
    for comma, after in zip(tokens, [*tokens[1:], None], strict=True):
        if comma.token_type is TokenType.COMMA and (
            after is None or after.token_type in _AFTER_NO_COMMA
        ):
            return SyntaxProblem("nothing after this comma", comma.line, comma.col)
    for select in tree.find_all(exp.Select):
        if not select.expressions:
            return SyntaxProblem("SELECT names no columns (name them, or SELECT *)")
    for group in tree.find_all(exp.Group):
        if not any(group.args.values()):
            return SyntaxProblem("GROUP BY names nothing to group by")
    return None
