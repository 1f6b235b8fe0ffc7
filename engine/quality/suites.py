"""Expectation suites run: GX's expectations built from each table's suite as written
(`engine.definitions.suites`), and the helper columns it derives computed over the table."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from great_expectations import expectations as gxe
from great_expectations.expectations.expectation import Expectation
from pydantic.v1 import ValidationError

from engine.definitions.suites import (
    FINITE_SUFFIX,
    Derived,
    ExpectationDef,
    SuiteDef,
    has_floats,
    load_suite_def,
    load_suite_defs,
)
from engine.errors import UserError, first_line
from engine.lake.values import repair_text

__all__ = ["COMPUTED", "Suite", "expectation_classes", "finite_rows", "load_suite", "load_suites"]


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


#: How each of DERIVED_KINDS is computed over the table's rows.
COMPUTED: Mapping[str, Callable[[pd.DataFrame, Any, dt.datetime], pd.Series]] = {
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


def _bad_rows(array: pa.Array) -> np.ndarray:
    """Per row: does it hold a NaN or an infinity (at any depth)?"""
    kind = array.type
    if pa.types.is_floating(kind):
        return ~pc.fill_null(pc.is_finite(array), True).to_numpy(zero_copy_only=False)
    bad = np.zeros(len(array), dtype=bool)
    if pa.types.is_struct(kind):
        for i, f in enumerate(kind):
            if has_floats(f.type):
                bad |= _bad_rows(pc.struct_field(array, [i]))
        return bad
    # A list: a row is bad when one of its items is.
    items = array.flatten()
    parents = pc.list_parent_indices(array).to_numpy(zero_copy_only=False)
    bad[parents[_bad_rows(items)]] = True
    return bad


def finite_rows(column: pa.ChunkedArray) -> np.ndarray:
    """Per row of a column holding floats: True unless it holds a NaN or an infinity."""
    # From the Arrow data: pandas reads NaN as missing, where NULL and NaN differ (NULL counts
    # as finite here; the suite's not-null checks are separate).
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
            out[d.name] = COMPUTED[d.kind](out, d.arg, now)
        return out


@cache
def expectation_classes() -> dict[str, type[Expectation]]:
    """GX's expectation classes by the names a suite writes them with (expect_..._to_...)."""
    named = {re.sub(r"(?<!^)(?=[A-Z])", "_", attr).lower(): cls for attr, cls in vars(gxe).items()}
    return {
        name: cls
        for name, cls in named.items()
        if name.startswith("expect_") and isinstance(cls, type) and issubclass(cls, Expectation)
    }


def _expectation(written: ExpectationDef, where: Path) -> Expectation:
    # The name and the argument names were checked as written (gx_expectations.txt, which a
    # test holds to GX's classes); GX checks the values.
    try:
        return expectation_classes()[written.name](**written.kwargs)
    except ValidationError as err:
        # pydantic lists each way a value failed (as a number, as a dict...): the first says it.
        first = err.errors()[0]
        at = ".".join(str(part) for part in first["loc"] if part != "__root__")
        raise UserError(f"{where}: {written.name}{'.' if at else ''}{at}: {first['msg']}") from None
    except TypeError as err:
        raise UserError(f"{where}: {written.name}: {first_line(err)}") from None


def _suite(written: SuiteDef) -> Suite:
    checks = [_expectation(e, written.path) for e in written.expectations]
    checks += [
        gxe.ExpectColumnValuesToBeInSet(column=n + FINITE_SUFFIX, value_set=[True])
        for n in written.finite
    ]
    return Suite(written.table, written.path, written.derived, tuple(checks), written.finite)


def load_suite(path: Path, schema: pa.Schema) -> Suite:
    """Read and check one suite file against the table's columns, with GX's expectations
    built; every column holding floats also gets its finiteness expectation."""
    return _suite(load_suite_def(path, schema))


def load_suites(
    schemas: Mapping[str, pa.Schema], folder: Path, *, only: Collection[str] | None = None
) -> dict[str, Suite]:
    """The suite of every table that has one (or of those `only` names), by table name
    (`schemas`: each table's Arrow schema, `TableDef.arrow_schema`)."""
    defs = load_suite_defs(schemas, folder, only=only)
    return {name: _suite(d) for name, d in defs.items()}
