"""sqlglot's syntax errors in the words of the SQL they are about, and where they are."""

from __future__ import annotations

import re
from typing import NamedTuple

from sqlglot.errors import ParseError, SqlglotError

__all__ = ["SyntaxProblem", "syntax_problem"]

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
