"""Expectation suites: one `quality/suites/<table>.yaml` per Delta table, with derived columns."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import yaml
from great_expectations import expectations as gxe
from great_expectations.expectations.expectation import Expectation
from pydantic.v1 import ValidationError

from engine.errors import UserError

__all__ = ["DERIVED_KINDS", "SUITES_DIR", "Suite", "load_suite", "load_suites"]

SUITES_DIR = Path(__file__).resolve().parent / "suites"

_COLUMN_ARGS = ("column", "column_A", "column_B")


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


@dataclass(frozen=True)
class Suite:
    """One table's checks: derived columns, then GX expectations over the table and them."""

    table: str
    path: Path
    derived: tuple[Derived, ...]
    expectations: tuple[Expectation, ...]

    def frame(self, df: pd.DataFrame, now: dt.datetime) -> pd.DataFrame:
        """The table's rows with the derived columns added, in declared order."""
        out = df.copy()
        for d in self.derived:
            out[d.name] = DERIVED_KINDS[d.kind](out, d.arg, now)
        return out


def _expectation_class(name: str, where: Path) -> type[Expectation]:
    cls = getattr(gxe, "".join(p.title() for p in name.split("_")), None)
    if not (isinstance(cls, type) and issubclass(cls, Expectation)) or not name.startswith(
        "expect_"
    ):
        raise UserError(f"{where}: unknown expectation '{name}'")
    return cls


def _derived(raw: Any, columns: set[str], where: Path) -> tuple[Derived, ...]:
    if not isinstance(raw, dict):
        raise UserError(f"{where}: 'derived' must map names to {{kind: argument}}")
    out: list[Derived] = []
    for name, spec in raw.items():
        if not (isinstance(spec, dict) and len(spec) == 1):
            raise UserError(f"{where}: derived '{name}' must be one {{kind: argument}}")
        kind, arg = next(iter(spec.items()))
        if kind not in DERIVED_KINDS:
            known = ", ".join(DERIVED_KINDS)
            raise UserError(f"{where}: derived '{name}': unknown kind '{kind}' (have: {known})")
        d = Derived(str(name), kind, arg)
        well_formed = (
            isinstance(arg, list) and len(arg) == 2
            if kind in ("abs_diff", "product_of", "seconds_between")
            else isinstance(arg, str)
        )
        if kind == "sum_of" and well_formed:
            well_formed = bool(re.fullmatch(r"\w+\.\w+", arg))
        if not well_formed:
            raise UserError(f"{where}: derived '{name}': bad argument {arg!r} for {kind}")
        missing = [c for c in d.sources() if c not in columns]
        if missing:
            raise UserError(f"{where}: derived '{name}' reads unknown column '{missing[0]}'")
        columns.add(d.name)
        out.append(d)
    return tuple(out)


def _expectation(item: Any, columns: set[str], where: Path) -> Expectation:
    if not (isinstance(item, dict) and len(item) == 1):
        raise UserError(f"{where}: each expectation must be one {{expect_...: {{arguments}}}}")
    name, kwargs = next(iter(item.items()))
    cls = _expectation_class(str(name), where)
    kwargs = kwargs or {}
    named = [kwargs[a] for a in _COLUMN_ARGS if a in kwargs] + list(kwargs.get("column_list", []))
    unknown = [c for c in named if c not in columns]
    if unknown:
        raise UserError(f"{where}: {name}: unknown column '{unknown[0]}'")
    try:
        return cls(**kwargs)
    except (ValidationError, TypeError) as err:
        first = str(err).replace("\n", " ")
        raise UserError(f"{where}: {name}: {first}") from None


def load_suite(path: Path, table_columns: Collection[str]) -> Suite:
    """Parse and check one suite file against the table's columns."""
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as err:
        raise UserError(f"{path}: {str(err).splitlines()[0]}") from None
    if not isinstance(raw, dict) or set(raw) - {"table", "derived", "expectations"}:
        raise UserError(f"{path}: expected keys table, derived, expectations")
    if raw.get("table") != path.stem:
        raise UserError(f"{path}: 'table' must be '{path.stem}', the file's name")
    columns = set(table_columns)
    derived = _derived(raw.get("derived") or {}, columns, path)
    items = raw.get("expectations") or []
    if not isinstance(items, list) or not items:
        raise UserError(f"{path}: 'expectations' must be a non-empty list")
    return Suite(
        table=path.stem,
        path=path,
        derived=derived,
        expectations=tuple(_expectation(i, columns, path) for i in items),
    )


def load_suites(
    table_columns: Mapping[str, Collection[str]], folder: Path = SUITES_DIR
) -> dict[str, Suite]:
    """The suite of every table that has one, by table name."""
    suites: dict[str, Suite] = {}
    for path in sorted(folder.glob("*.yaml")):
        if path.stem not in table_columns:
            raise UserError(f"{path}: no table '{path.stem}' in tables/")
        suites[path.stem] = load_suite(path, table_columns[path.stem])
    return suites
