"""Query results printed alike by every engine: a text table, JSON or CSV."""

from __future__ import annotations

import csv
import datetime as dt
import decimal
import json
import re
import secrets
import sys
from collections.abc import Sequence
from typing import Any, Literal, TextIO

import pyarrow as pa

from engine.errors import UserError
from engine.lake.values import json_safe, repair_text, replace_leaves

__all__ = ["OutputFormat", "print_rows"]

OutputFormat = Literal["table", "json", "csv"]


def _interval(days: int, microseconds: int, months: int = 0) -> str:
    """An interval as Spark casts one to text: `INTERVAL '1 02:03:04.5' DAY TO SECOND`, or
    `INTERVAL '1-2' YEAR TO MONTH`; both engines hand over day-time ones without their fields."""
    if months and not (days or microseconds):
        sign, months = ("-" if months < 0 else ""), abs(months)
        return f"INTERVAL '{sign}{months // 12}-{months % 12}' YEAR TO MONTH"
    total = days * 86_400_000_000 + microseconds
    sign, total = ("-" if total < 0 else ""), abs(total)
    seconds, micros = divmod(total, 1_000_000)
    minutes, second = divmod(seconds, 60)
    hours, minute = divmod(minutes, 60)
    day, hour = divmod(hours, 24)
    fraction = f".{micros:06d}".rstrip("0") if micros else ""
    text = f"INTERVAL '{sign}{day} {hour:02d}:{minute:02d}:{second:02d}{fraction}' DAY TO SECOND"
    return f"INTERVAL '{months} months' + {text}" if months else text  # DuckDB's mixed kind


def _plain(value: Any) -> Any:
    # Both engines print alike: times in UTC, integral decimals (DuckDB's HUGEINT sums) as
    # integers, other decimals with every digit (a float keeps about 16: `_dumps`); NaN and
    # ±Infinity as text, bytes as base64 (engine/lake/values.py).
    if isinstance(value, float | bytes):
        return json_safe(value)
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.UTC).isoformat()
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    if isinstance(value, decimal.Decimal) and value == value.to_integral_value():
        return int(value)
    if isinstance(value, dt.timedelta):  # Spark's day-time intervals
        return _interval(value.days, value.seconds * 1_000_000 + value.microseconds)
    if isinstance(value, pa.MonthDayNano):  # DuckDB's intervals
        return _interval(value.days, value.nanoseconds // 1000, value.months)
    if isinstance(value, dict):  # a struct, or a map (its keys as text, as JSON has them)
        return {_key(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _key(key: Any) -> str:
    plain = _plain(key)
    return plain if isinstance(plain, str) else _dumps(plain)


def _dumps(plain: Any) -> str:
    """JSON text of a `_plain` value, its decimals written as numbers with every digit (Python's
    json writes only floats): each goes out as a marked string whose quotes are then taken off."""
    mark = secrets.token_hex(8)

    def exact(value: Any) -> str:
        if isinstance(value, decimal.Decimal):
            return f"{mark}{value}{mark}"
        raise TypeError(f"{type(value).__name__} is not JSON")

    text = json.dumps(plain, allow_nan=False, default=exact)
    return re.sub(f'"{mark}([^"]*){mark}"', r"\1", text)


def _cell(value: Any) -> str:
    if value is None:
        return "NULL"
    plain = _plain(value)
    return _dumps(plain) if isinstance(plain, dict | list) else str(plain)


def _values(column: pa.ChunkedArray) -> list[Any]:
    shortest = replace_leaves(
        column.type, lambda t: pa.string() if pa.types.is_float32(t) else None
    )
    if shortest is not None:
        # A FLOAT as the double of its shortest text, as Spark prints it: 0.1, not the
        # 0.10000000149011612 that its bits make as a Python float (a double).
        wide = replace_leaves(
            column.type, lambda t: pa.float64() if pa.types.is_float32(t) else None
        )
        column = column.cast(shortest).cast(wide)
    try:
        return _pylist(column)
    except (OverflowError, ValueError):
        # A date or time past Python's year 9999 (Spark and DuckDB go further): Arrow's text.
        text = replace_leaves(
            column.type, lambda t: pa.string() if pa.types.is_temporal(t) else None
        )
        return _pylist(column.cast(text or column.type))


def _pylist(column: pa.ChunkedArray) -> list[Any]:
    """The column's values, a map as a dict, so it prints as a JSON object ({"a": 1}), as
    Spark's to_json writes one; a map keyed by structs or arrays keeps its entries as pairs."""
    try:
        return column.to_pylist(maps_as_pydicts="strict")
    except TypeError:  # such a key is not hashable
        return column.to_pylist()


def _rows(result: pa.Table) -> list[list[Any]]:
    """The result's rows as lists of Python values, whatever they hold (engine/lake/values.py)."""
    columns = [_values(c) for c in repair_text(result).columns]
    return [list(r) for r in zip(*columns, strict=True)] if columns else []


def _print_table(names: Sequence[str], rows: list[list[Any]], out: TextIO) -> None:
    cells = [[_cell(v) for v in r] for r in rows]
    widths = [max([len(n), *(len(c[i]) for c in cells)]) for i, n in enumerate(names)]
    line = "+" + "+".join("-" * (w + 2) for w in widths) + "+"
    out.write(line + "\n")
    out.write("| " + " | ".join(n.ljust(w) for n, w in zip(names, widths, strict=True)) + " |\n")
    out.write(line + "\n")
    for c in cells:
        out.write("| " + " | ".join(v.ljust(w) for v, w in zip(c, widths, strict=True)) + " |\n")
    out.write(line + "\n")
    out.write(f"({len(rows)} row{'s' if len(rows) != 1 else ''})\n")


def print_rows(result: pa.Table, fmt: OutputFormat, out: TextIO | None = None) -> None:
    """Print a result as a text table, one JSON array of row objects, or CSV.

    Any stored value prints: text that is not UTF-8 with `\\xNN` escapes, NaN and ±Infinity
    as "NaN", "Infinity", "-Infinity" (so the JSON is always JSON), bytes as base64.
    """
    out = out or sys.stdout  # looked up now: the stream may be replaced after import
    names = result.column_names
    rows = _rows(result)
    if fmt == "json":
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            # A JSON object keeps one value per name: the other column would be lost unseen.
            raise UserError(
                f"query: --format json: more than one column is named {twice[0]}; give each "
                "its own name with AS"
            )
        objects = [_plain(dict(zip(names, r, strict=True))) for r in rows]
        out.write(_dumps(objects) + "\n")
    elif fmt == "csv":
        writer = csv.writer(out)
        writer.writerow(names)
        writer.writerows([_cell(v) if v is not None else "" for v in r] for r in rows)
    else:
        _print_table(names, rows, out)
