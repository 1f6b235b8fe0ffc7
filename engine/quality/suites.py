"""Expectation suites: one `quality/suites/<table>.yaml` per Delta table, with derived columns."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from great_expectations import expectations as gxe
from great_expectations.expectations.expectation import Expectation
from pydantic.v1 import ValidationError

from engine.definitions.yaml_files import At, describe, mapping, read_yaml, text
from engine.errors import UserError, closest
from engine.lake.values import repair_text

__all__ = [
    "DERIVED_KINDS",
    "FINITE_SUFFIX",
    "Suite",
    "finite_rows",
    "load_suite",
    "load_suites",
]


_COLUMN_ARGS = ("column", "column_A", "column_B")
_SUITE_KEYS = ("table", "derived", "expectations")

# Every column that holds floating-point numbers (DOUBLE, FLOAT, also inside arrays and
# structs) gets a helper column `<column>_is_finite` and an expectation that it is true: NaN
# and ±Infinity fail the suite, naming the column. pandas reads NaN as missing, so the helper
# is computed from the Arrow data, where NULL and NaN differ (NULL counts as finite here; the
# suite's not-null checks are separate).
FINITE_SUFFIX = "_is_finite"


def _size_of(df: pd.DataFrame, arg: str, now: dt.datetime) -> pd.Series:
    return df[arg].map(lambda v: None if v is None else len(v)).astype("Int64")


def _sum_of(df: pd.DataFrame, arg: str, now: dt.datetime) -> pd.Series:
    column, field = arg.split(".", 1)
    return df[column].map(
        lambda v: None if v is None else float(sum(item[field] or 0.0 for item in v))
    )


def _abs_diff(df: pd.DataFrame, arg: list[str], now: dt.datetime) -> pd.Series:
    a, b = arg
    return (df[a].astype("float64") - df[b].astype("float64")).abs()


def _product_of(df: pd.DataFrame, arg: list[str], now: dt.datetime) -> pd.Series:
    a, b = arg
    return df[a].astype("float64") * df[b].astype("float64")


def _is_null(df: pd.DataFrame, arg: str, now: dt.datetime) -> pd.Series:
    return df[arg].isna()


def _is_not_null(df: pd.DataFrame, arg: str, now: dt.datetime) -> pd.Series:
    return df[arg].notna()


def _is_negative(df: pd.DataFrame, arg: str, now: dt.datetime) -> pd.Series:
    return df[arg].astype("float64") < 0


def _seconds_between(df: pd.DataFrame, arg: list[str], now: dt.datetime) -> pd.Series:
    a, b = arg
    return (df[b] - df[a]).dt.total_seconds()


def _hours_before_run(df: pd.DataFrame, arg: str, now: dt.datetime) -> pd.Series:
    return (pd.Timestamp(now) - df[arg]).dt.total_seconds() / 3600.0


# The only computations a suite can ask for: suites name one of these, never code.
DERIVED_KINDS: Mapping[str, Callable[[pd.DataFrame, Any, dt.datetime], pd.Series]] = {
    "size_of": _size_of,
    "sum_of": _sum_of,
    "abs_diff": _abs_diff,
    "product_of": _product_of,
    "is_null": _is_null,
    "is_not_null": _is_not_null,
    "is_negative": _is_negative,
    "seconds_between": _seconds_between,
    "hours_before_run": _hours_before_run,
}


@dataclass(frozen=True)
class Derived:
    """A helper column computed before validation: `name = kind(arg)`."""

    name: str
    kind: str
    arg: Any

    def sources(self) -> list[str]:
        """The columns this one reads."""
        args = self.arg if isinstance(self.arg, list) else [self.arg]
        return [a.split(".", 1)[0] for a in args]


def _has_floats(kind: pa.DataType) -> bool:
    if pa.types.is_floating(kind):
        return True
    if pa.types.is_struct(kind):
        return any(_has_floats(f.type) for f in kind)
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return _has_floats(kind.value_type)
    return False  # tables/ has no maps


def _bad_rows(array: pa.Array) -> np.ndarray:
    """Per row: does it hold a NaN or an infinity (at any depth)?"""
    kind = array.type
    if pa.types.is_floating(kind):
        return ~pc.fill_null(pc.is_finite(array), True).to_numpy(zero_copy_only=False)
    bad = np.zeros(len(array), dtype=bool)
    if pa.types.is_struct(kind):
        for i, f in enumerate(kind):
            if _has_floats(f.type):
                bad |= _bad_rows(pc.struct_field(array, [i]))
        return bad
    # A list: a row is bad when one of its items is.
    items = array.flatten()
    parents = pc.list_parent_indices(array).to_numpy(zero_copy_only=False)
    bad[parents[_bad_rows(items)]] = True
    return bad


def finite_rows(column: pa.ChunkedArray) -> np.ndarray:
    """Per row of a column holding floats: True unless it holds a NaN or an infinity."""
    if column.num_chunks == 0:
        return np.ones(0, dtype=bool)
    return ~np.concatenate([_bad_rows(c) for c in column.chunks])


@dataclass(frozen=True)
class Suite:
    """One table's checks: derived columns, then GX expectations over the table and them;
    `finite` are the columns that hold floats (checked for NaN and infinities)."""

    table: str
    path: Path
    derived: tuple[Derived, ...]
    expectations: tuple[Expectation, ...]
    finite: tuple[str, ...] = ()

    def frame(self, data: pa.Table, now: dt.datetime) -> pd.DataFrame:
        """The table's rows as pandas (text that is not UTF-8 with `\\xNN` escapes, see
        engine/lake/values.py), with the finiteness and derived columns added."""
        out = repair_text(data).to_pandas()
        for name in self.finite:
            out[name + FINITE_SUFFIX] = finite_rows(data.column(name))
        for d in self.derived:
            out[d.name] = DERIVED_KINDS[d.kind](out, d.arg, now)
        return out


def _expectation_names() -> dict[str, type[Expectation]]:
    """GX's expectation classes by the names a suite writes them with (expect_..._to_...)."""
    named = {re.sub(r"(?<!^)(?=[A-Z])", "_", attr).lower(): cls for attr, cls in vars(gxe).items()}
    return {
        name: cls
        for name, cls in named.items()
        if name.startswith("expect_") and isinstance(cls, type) and issubclass(cls, Expectation)
    }


def _expectation_class(name: str, where: Path) -> type[Expectation]:
    known = _expectation_names()
    if name not in known:
        raise UserError(f"{where}: unknown expectation '{name}'{_meant(name, known)}")
    return known[name]


def _meant(name: str, known: Collection[str]) -> str:
    close = closest(name, known)
    return f" (did you mean {close}?)" if close else ""


def _derived(raw: Any, columns: set[str], where: Path) -> tuple[Derived, ...]:
    out: list[Derived] = []
    specs = mapping(raw, At(where, "derived"), "a mapping (name: {kind: argument})")
    for name, spec in specs.items():
        if not (isinstance(spec, dict) and len(spec) == 1):
            raise UserError(f"{where}: derived '{name}' must be one {{kind: argument}}")
        kind, arg = next(iter(spec.items()))
        if kind not in DERIVED_KINDS:
            known = ", ".join(DERIVED_KINDS)
            raise UserError(f"{where}: derived '{name}': unknown kind '{kind}' (have: {known})")
        d = Derived(str(name), kind, arg)
        well_formed = (
            isinstance(arg, list) and len(arg) == 2 and all(isinstance(a, str) for a in arg)
            if kind in ("abs_diff", "product_of", "seconds_between")
            else isinstance(arg, str)
        )
        if kind == "sum_of" and well_formed:
            well_formed = bool(re.fullmatch(r"\w+\.\w+", arg))
        if not well_formed:
            raise UserError(f"{where}: derived '{name}': bad argument {arg!r} for {kind}")
        missing = [c for c in d.sources() if c not in columns]
        if missing:
            meant = _meant(missing[0], columns)
            raise UserError(f"{where}: derived '{name}' reads unknown column '{missing[0]}'{meant}")
        columns.add(d.name)
        out.append(d)
    return tuple(out)


def _expectation(item: Any, columns: set[str], where: Path) -> Expectation:
    if not (isinstance(item, dict) and len(item) == 1):
        raise UserError(f"{where}: each expectation must be one {{expect_...: {{arguments}}}}")
    name, kwargs = next(iter(item.items()))
    cls = _expectation_class(str(name), where)
    at = At(where, str(name))
    kwargs = mapping(kwargs, at, "a mapping of its arguments ({column: ...})")
    column_list = kwargs.get("column_list", [])
    if not isinstance(column_list, list):
        raise (at / "column_list").error(f"expected a list of columns, got {describe(column_list)}")
    named = [text(kwargs[a], at / a, "a column name") for a in _COLUMN_ARGS if a in kwargs]
    named += [text(c, at / "column_list", "column names") for c in column_list]
    unknown = [c for c in named if c not in columns]
    if unknown:
        meant = _meant(unknown[0], columns)
        raise UserError(f"{where}: {name}: unknown column '{unknown[0]}'{meant}")
    try:
        return cls(**kwargs)
    except (ValidationError, TypeError) as err:
        first = str(err).replace("\n", " ")
        raise UserError(f"{where}: {name}: {first}") from None


def load_suite(path: Path, schema: pa.Schema) -> Suite:
    """Parse and check one suite file against the table's columns; every column holding
    floats also gets its finiteness expectation."""
    raw = mapping(read_yaml(path), At(path), "a mapping (table, expectations)", known=_SUITE_KEYS)
    if raw.get("table") != path.stem:
        raise UserError(f"{path}: 'table' must be '{path.stem}', the file's name")
    finite = tuple(f.name for f in schema if _has_floats(f.type))
    columns = set(schema.names)
    taken = [n + FINITE_SUFFIX for n in finite if n + FINITE_SUFFIX in columns]
    if taken:
        raise UserError(f"{path}: column '{taken[0]}' clashes with a finiteness check's name")
    columns |= {n + FINITE_SUFFIX for n in finite}
    derived = _derived(raw.get("derived"), columns, path)
    items = raw.get("expectations") or []
    if not isinstance(items, list) or not items:
        raise UserError(f"{path}: 'expectations' must be a non-empty list")
    checks = [_expectation(i, columns, path) for i in items]
    checks += [
        gxe.ExpectColumnValuesToBeInSet(column=n + FINITE_SUFFIX, value_set=[True]) for n in finite
    ]
    return Suite(
        table=path.stem,
        path=path,
        derived=derived,
        expectations=tuple(checks),
        finite=finite,
    )


def load_suites(schemas: Mapping[str, pa.Schema], folder: Path) -> dict[str, Suite]:
    """The suite of every table that has one, by table name (`schemas`: each table's Arrow
    schema, `TableDef.arrow_schema`)."""
    suites: dict[str, Suite] = {}
    for path in sorted(folder.glob("*.yaml")):
        if path.stem not in schemas:
            raise UserError(f"{path}: no table '{path.stem}' in tables/")
        suites[path.stem] = load_suite(path, schemas[path.stem])
    return suites
