"""Expectations: named rules a SQL file declares about its view's rows, in comment lines

    -- CONSTRAINT valid_price EXPECT (price >= 0) ON VIOLATION DROP ROW

so the file still pastes into spark-sql. Without ON VIOLATION a rule warns (the row is kept
and counted); DROP ROW sends the row to quarantine as `expectation <name>`; FAIL UPDATE stops
the query before its batch commits. A row keeps to a rule only where its condition is true:
NULL breaks it (docs/decisions.md).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import sqlglot
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import SqlglotError

from engine.definitions.syntax import syntax_problem

__all__ = [
    "Action",
    "Expectation",
    "ExpectationError",
    "by_action",
    "parse_expectations",
    "rejects_view",
]

Action = Literal["warn", "drop", "fail"]
_ACTIONS: dict[str, Action] = {"": "warn", "DROP ROW": "drop", "FAIL UPDATE": "fail"}

# The counts of a view's rules sit beside its rows checked and dropped (runtime/expectations.py).
_RESERVED = frozenset({"rows", "dropped"})
# A comment line that starts with CONSTRAINT declares a rule, and so does one shaped like a rule
# with that word misspelt, in capitals as rules are written (`CONSTRAINTS x EXPECT (...)` was a
# comment: the rule gone unseen); anything else is a comment.
_DECLARES = re.compile(
    r"^\s*--\s*(?:CONSTRAINT\b|(?-i:[A-Z]{4,})\s+[A-Za-z_]\w*\s+EXPECT\s*\()", re.IGNORECASE
)
_RULE = re.compile(
    r"^\s*--\s*CONSTRAINT\s+(?P<name>[A-Za-z_][A-Za-z0-9_]*)\s+EXPECT\s*\((?P<condition>.*)\)"
    r"\s*(?:ON\s+VIOLATION\s+(?P<action>DROP\s+ROW|FAIL\s+UPDATE))?\s*$",
    re.IGNORECASE,
)


class ExpectationError(ValueError):
    """A CONSTRAINT line that does not read as a rule; `line` is its line in the file."""

    def __init__(self, message: str, line: int) -> None:
        super().__init__(message)
        self.line = line


@dataclass(frozen=True)
class Expectation:
    """One rule: its name, its condition as Spark SQL, what a violation does, and its line."""

    name: str
    condition: str
    action: Action
    line: int

    @property
    def clause(self) -> str:
        """The ON VIOLATION clause as written (empty for a warning)."""
        return {"warn": "", "drop": "ON VIOLATION DROP ROW", "fail": "ON VIOLATION FAIL UPDATE"}[
            self.action
        ]


def by_action(rules: Sequence[Expectation]) -> dict[str, list[str]]:
    """The rules' names by what a violation does (`warn`, `drop`, `fail`), in file order: what
    a batch's event records beside its counts, so `log` tells dropped rows from warnings."""
    found: dict[str, list[str]] = {}
    for rule in rules:
        found.setdefault(rule.action, []).append(rule.name)
    return found


def parse_expectations(text: str, dialect: type[Dialect]) -> tuple[Expectation, ...]:
    """The rules declared in a SQL file's text, in the order written; each condition must
    parse in `dialect`."""
    rules: list[Expectation] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not _DECLARES.match(line):
            continue
        found = _RULE.match(line)
        if not found:
            raise ExpectationError(
                "expected `-- CONSTRAINT name EXPECT (condition) "
                "[ON VIOLATION DROP ROW | FAIL UPDATE]` on one line",
                number,
            )
        name, condition = found["name"].lower(), found["condition"].strip()
        try:
            parsed = sqlglot.parse_one(condition, read=dialect) if condition else None
        except SqlglotError as err:
            message = syntax_problem(err).message
            raise ExpectationError(f"expectation {name}: {message}", number) from None
        if parsed is None:
            raise ExpectationError(f"expectation {name}: the condition is empty", number)
        if name in _RESERVED:
            raise ExpectationError(f"expectation {name}: the name is taken by the counts", number)
        if any(rule.name == name for rule in rules):
            raise ExpectationError(f"expectation {name} is declared twice", number)
        action = _ACTIONS[" ".join((found["action"] or "").upper().split())]
        rules.append(Expectation(name, condition, action, number))
    return tuple(rules)


def rejects_view(view: str) -> str:
    """The engine's view of the rows `view` drops, on their way to the quarantine table."""
    return f"{view}__dropped"
