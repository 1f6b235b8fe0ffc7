"""Stored values the tools print or hand to pandas, whatever they hold.

A STRING column can hold bytes that are not UTF-8 (written by another tool, or by an older
version of a pipeline), and a DOUBLE can hold NaN or ±Infinity. Neither may crash `query`,
`history` or `quality`, and JSON output must stay JSON (docs/decisions.md):

* text that is not valid UTF-8 is shown with each bad byte as `\\xNN` (Python's
  `backslashreplace`), e.g. `caf\\xe9`; valid text is untouched;
* NaN, Infinity and -Infinity are printed as the strings "NaN", "Infinity" and "-Infinity"
  (what Spark's `to_json` writes), in every format;
* BINARY values are printed as base64 text (as Spark's `to_json` does).
"""

from __future__ import annotations

import base64
import math
from collections.abc import Callable
from typing import Any

import pyarrow as pa

__all__ = ["NON_FINITE", "json_safe", "repair_text", "replace_leaves"]

NON_FINITE = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}


def replace_leaves(
    kind: pa.DataType, leaf: Callable[[pa.DataType], pa.DataType | None]
) -> pa.DataType | None:
    """`kind` with each type that `leaf` maps to another replaced, at any depth (structs,
    lists, maps); None when `leaf` replaced nothing."""
    own = leaf(kind)
    if own is not None:
        return own
    if pa.types.is_struct(kind):
        fields = [kind.field(i) for i in range(kind.num_fields)]
        inner = [replace_leaves(f.type, leaf) for f in fields]
        if all(t is None for t in inner):
            return None
        return pa.struct(
            [f.with_type(t) if t is not None else f for f, t in zip(fields, inner, strict=True)]
        )
    if pa.types.is_map(kind):
        key, item = replace_leaves(kind.key_type, leaf), replace_leaves(kind.item_type, leaf)
        if key is None and item is None:
            return None
        return pa.map_(key or kind.key_type, item or kind.item_type)
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        inner = replace_leaves(kind.value_type, leaf)
        if inner is None:
            return None
        field = kind.value_field.with_type(inner)
        return pa.list_(field) if pa.types.is_list(kind) else pa.large_list(field)
    return None


def _binary(kind: pa.DataType) -> pa.DataType | None:
    """The binary type of a string type's layout."""
    if pa.types.is_string(kind):
        return pa.binary()
    if pa.types.is_large_string(kind):
        return pa.large_binary()
    return None


def _decoded(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="backslashreplace")
    if isinstance(value, dict):
        return {k: _decoded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_decoded(v) for v in value]
    if isinstance(value, tuple):  # a map entry
        return tuple(_decoded(v) for v in value)
    return value


def _repaired(column: pa.ChunkedArray, binary: pa.DataType) -> pa.ChunkedArray:
    chunks = []
    for chunk in column.chunks:
        try:
            chunk.validate(full=True)
        except pa.ArrowInvalid:
            values = [_decoded(v) for v in chunk.view(binary).to_pylist()]
            chunk = pa.array(values, type=column.type)
        chunks.append(chunk)
    return pa.chunked_array(chunks, type=column.type)


def repair_text(data: pa.Table) -> pa.Table:
    """The table with every text value that is not valid UTF-8 shown with its bad bytes as
    `\\xNN` escapes; valid text (and every other column) is returned as it is."""
    for i, field in enumerate(data.schema):
        binary = replace_leaves(field.type, _binary)
        if binary is not None:
            data = data.set_column(i, field, _repaired(data.column(i), binary))
    return data


def json_safe(value: Any) -> Any:
    """`value` with non-finite floats as "NaN"/"Infinity"/"-Infinity" and bytes as base64
    text, inside lists, tuples and dicts too, so `json.dumps(allow_nan=False)` accepts it."""
    if isinstance(value, float) and not math.isfinite(value):
        return NON_FINITE[repr(value)]
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value
