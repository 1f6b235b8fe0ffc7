"""sqlglot's syntax errors as a SQL author reads them (engine/definitions/syntax.py)."""

from __future__ import annotations

import pytest
import sqlglot
from sqlglot.errors import SqlglotError

from engine.definitions.syntax import SyntaxProblem, syntax_problem


@pytest.mark.parametrize(
    ("sql", "problem"),
    [
        ("SELECT a FROM", ("Expected table name but got the end of the text", 1, 13)),
        ("SELECT a FROM WHERE", ("Expected table name but got 'WHERE'", 1, 19)),
        ("SELECT a FROM t WHERE", ("WHERE is missing what comes after it", 1, 21)),
        ("SELECT a FROM t\nLIMIT", ("LIMIT is missing what comes after it", 2, 5)),
        ("SELECT a FROM t WHERE a >", ("> is missing what comes after it", 1, 25)),
        ("SELECT CAST(a AS) FROM t", ("Expected TYPE after CAST", 1, 17)),
        ("SELECT (a\nFROM t", ("Expecting )", 2, 4)),
        ("SELECT 'a FROM t", ("Error tokenizing 'SELECT 'a FROM '", None, None)),
    ],
)
def test_syntax_problems_read_as_sql(sql: str, problem: tuple[str, int | None, int | None]):
    with pytest.raises(SqlglotError) as caught:
        sqlglot.parse(sql, read="spark")
    assert syntax_problem(caught.value) == SyntaxProblem(*problem)
