"""A problem found while planning or linting, with the file and line it is in."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from sqlglot import exp

from engine.definitions.sql import SqlError, position
from engine.errors import UserError
from engine.project import shown

__all__ = ["Finding", "Severity", "finding_at", "from_sql_error", "from_user_error"]

Severity = Literal["error", "warning"]

# Our loaders' messages start with where they are: `path[:line[:col]]: message`.
_WHERE = re.compile(
    r"^(?P<path>[^:\s][^:]*?\.(?:sql|yaml|yml))(?::(?P<line>\d+))?(?::(?P<col>\d+))?: "
)


@dataclass(frozen=True)
class Finding:
    """One problem found in a file; `line`/`col` as in sqlglot (col: last character of the
    token), None where not known."""

    path: Path
    line: int | None
    col: int | None
    code: str
    message: str
    severity: Severity = "error"

    @property
    def shown_path(self) -> Path:
        """The path relative to the working folder where it is inside, else as it is."""
        return shown(self.path)

    @property
    def where(self) -> str:
        """`path[:line[:col]]`, the path as `shown_path`."""
        return ":".join(str(p) for p in (self.shown_path, self.line, self.col) if p is not None)

    def __str__(self) -> str:
        return f"{self.where}: {self.severity}: {self.message} [{self.code}]"

    def error(self) -> UserError:
        """The finding as the one-line error `run` stops with."""
        return UserError(f"{self.where}: {self.message}")

    def sort_key(self) -> tuple[str, int, int, str]:
        """Order of the report: file, then line and column, then message."""
        return (str(self.shown_path), self.line or 0, self.col or 0, self.message)


def finding_at(
    path: Path, node: exp.Expression | None, code: str, message: str, severity: Severity = "error"
) -> Finding:
    """A finding at the first position inside `node` (no line when node is None)."""
    line, col = position(node) if node is not None else (None, None)
    return Finding(path, line, col, code, message, severity)


def from_sql_error(err: SqlError, code: str, default_path: Path) -> Finding:
    """A finding from the SQL loader's error, which knows its file and line."""
    return Finding(err.path or default_path, err.line, err.col, code, err.message)


def from_user_error(err: UserError, code: str, default_path: Path) -> Finding:
    """A finding from a loader's or planner's one-line error, placed at the file its
    message names (else `default_path`)."""
    text = str(err)
    match = _WHERE.match(text)
    if not match:
        return Finding(default_path, None, None, code, text)
    line, col = match.group("line"), match.group("col")
    return Finding(
        Path(match.group("path")),
        int(line) if line else None,
        int(col) if col else None,
        code,
        text[match.end() :],
    )
