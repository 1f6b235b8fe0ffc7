"""Spark's error texts as the one line a user sees (engine/runtime/errors.py)."""

from __future__ import annotations

import pytest

from engine.runtime.errors import spark_error_line

PROXY = (
    "An exception was raised by the Python Proxy. Return Message: Traceback (most recent call "
    'last):\n  File "engine/sinks/writer.py", line 112, in _write\n    rows = part.count()\n'
)


@pytest.mark.parametrize(
    ("text", "line"),
    [
        (
            "[TABLE_OR_VIEW_NOT_FOUND] The table `x` cannot be found. SQLSTATE: 42P01\n== SQL ==",
            "[TABLE_OR_VIEW_NOT_FOUND] The table `x` cannot be found. SQLSTATE: 42P01",
        ),
        (
            "Job aborted.\norg.apache.spark.api.python.PythonException: Traceback:\n"
            "engine.errors.UserError: sql/x.sql: no rows\n",
            "sql/x.sql: no rows",
        ),
        (
            PROXY + "pyspark.errors.exceptions.captured.NumberFormatException: "
            "[CAST_INVALID_INPUT] The value 'EUR' cannot be cast to \"INT\". SQLSTATE: 22018\n"
            "== SQL (line 1, position 77) ==\n...CAST(currency AS INT) AS code FROM li...\n"
            "                ^^^^^^^^^^\n\n=== Streaming Query ===\nIdentifier: main\n",
            "[CAST_INVALID_INPUT] The value 'EUR' cannot be cast to \"INT\". "
            "(in SQL ...CAST(currency AS INT) AS code FROM li...)",
        ),
        (
            PROXY + "ValueError: a handler emitted 3 values\n\n=== Streaming Query ===\n"
            "org.apache.spark.SparkException: not this one\n",
            "ValueError: a handler emitted 3 values (engine/sinks/writer.py:112 in _write)",
        ),
        (
            PROXY + "pyspark.errors.exceptions.captured.PythonException: \n  An exception was "
            "thrown from the Python worker.\nTraceback (most recent call last):\n"
            '  File "/v/lib/python3.11/site-packages/pyspark/worker.py", line 9, in main\n'
            '  File "handlers/carts.py", line 67, in update\n    1 / 0\n'
            "ZeroDivisionError: division by zero\n",
            "ZeroDivisionError: division by zero (handlers/carts.py:67 in update)",
        ),
    ],
)
def test_the_line_a_user_sees(text: str, line: str) -> None:
    assert spark_error_line(Exception(text)) == line
