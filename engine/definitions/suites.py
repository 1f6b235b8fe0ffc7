"""Expectation suites as written: `quality/suites/<table>.yaml`, read and checked against the
table's columns without Great Expectations, so `lint` reads them as it reads the SQL;
`engine.quality` builds GX's expectations from them and runs them."""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pyarrow as pa

from engine.definitions.yaml_files import At, describe, mapping, read_yaml, text
from engine.errors import UserError, did_you_mean

__all__ = [
    "DERIVED_KINDS",
    "FINITE_SUFFIX",
    "Derived",
    "ExpectationDef",
    "SuiteDef",
    "expectation_arguments",
    "has_floats",
    "load_suite_def",
    "load_suite_defs",
]

#: The only computations a suite can ask for (engine/quality/suites.py computes them): suites
#: name one of these, never code. Those of two columns take a list of both.
DERIVED_KINDS = (
    "size_of",
    "sum_of",
    "abs_diff",
    "product_of",
    "is_null",
    "is_not_null",
    "is_negative",
    "seconds_between",
    "hours_before_run",
)
_PAIRS = ("abs_diff", "product_of", "seconds_between")


def _number(kind: pa.DataType) -> bool:
    return pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_decimal(kind)


def _list(kind: pa.DataType) -> bool:
    return pa.types.is_list(kind) or pa.types.is_large_list(kind)


#: What each kind reads (said as in an error, and the Arrow types it takes) and the type of the
#: column it makes; engine/quality/suites.py computes them with pandas, which would fail on
#: other types in its own words, or read a text's length as a list's.
_READS: Mapping[str, tuple[str, Callable[[pa.DataType], bool]]] = {
    "size_of": ("a list", _list),
    "sum_of": ("a list of structs with a number field", _number),  # the field's type
    "abs_diff": ("numbers", _number),
    "product_of": ("numbers", _number),
    "is_null": ("any column", lambda _: True),
    "is_not_null": ("any column", lambda _: True),
    "is_negative": ("a number", _number),
    "seconds_between": ("timestamps", pa.types.is_timestamp),
    "hours_before_run": ("a timestamp", pa.types.is_timestamp),
}
_MAKES: Mapping[str, pa.DataType] = {
    "size_of": pa.int64(),
    "is_null": pa.bool_(),
    "is_not_null": pa.bool_(),
    "is_negative": pa.bool_(),
}

# Every column that holds floating-point numbers (DOUBLE, FLOAT, also inside arrays and
# structs) gets a helper column `<column>_is_finite` and an expectation that it is true: NaN
# and ±Infinity fail the suite, naming the column.
FINITE_SUFFIX = "_is_finite"

_COLUMN_ARGS = ("column", "column_A", "column_B")
_EXPECTATIONS_FILE = Path(__file__).resolve().with_name("gx_expectations.txt")
_SUITE_KEYS = ("table", "derived", "expectations")


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
class ExpectationDef:
    """One expectation as written: GX's snake-case name and its arguments."""

    name: str
    kwargs: Mapping[str, Any]


@dataclass(frozen=True)
class SuiteDef:
    """One table's suite as written; `finite` are the table's columns that hold floats."""

    table: str
    path: Path
    derived: tuple[Derived, ...]
    expectations: tuple[ExpectationDef, ...]
    finite: tuple[str, ...] = ()


@cache
def expectation_arguments() -> Mapping[str, frozenset[str]]:
    """GX's expectations by name, each with the arguments it takes (gx_expectations.txt)."""
    common: frozenset[str] = frozenset()
    found: dict[str, frozenset[str]] = {}
    for raw in _EXPECTATIONS_FILE.read_text().splitlines():
        name, *args = raw.split("#", 1)[0].split() or [""]
        if name == "*":
            common = frozenset(args)
        elif name:
            found[name] = frozenset(args)
    return {name: args | common for name, args in found.items()}


def has_floats(kind: pa.DataType) -> bool:
    """Whether a column of this type holds floats, at any depth."""
    if pa.types.is_floating(kind):
        return True
    if pa.types.is_struct(kind):
        return any(has_floats(f.type) for f in kind)
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return has_floats(kind.value_type)
    return False  # tables/ has no maps


def _derived(raw: Any, types: dict[str, pa.DataType], where: Path) -> tuple[Derived, ...]:
    """The suite's helper columns, each checked against the types of the columns it reads;
    `types` (the table's columns and the finiteness checks') gains theirs."""
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
        if d.name in types:
            # It would replace that column: every rule on it would check the helper instead.
            whose = "a finiteness check's" if d.name.endswith(FINITE_SUFFIX) else "a column's"
            raise UserError(f"{where}: derived '{name}' has {whose} name; give it one of its own")
        well_formed = (
            isinstance(arg, list) and len(arg) == 2 and all(isinstance(a, str) for a in arg)
            if kind in _PAIRS
            else isinstance(arg, str)
        )
        if kind == "sum_of" and well_formed:
            well_formed = bool(re.fullmatch(r"\w+\.\w+", arg))
        if not well_formed:
            raise UserError(f"{where}: derived '{name}': bad argument {arg!r} for {kind}")
        missing = [c for c in d.sources() if c not in types]
        if missing:
            meant = did_you_mean(missing[0], types)
            raise UserError(f"{where}: derived '{name}' reads unknown column '{missing[0]}'{meant}")
        wants, takes = _READS[kind]
        for read in arg if isinstance(arg, list) else [arg]:
            kind_read = _type_read(read, types)
            if kind_read is None or not takes(kind_read):
                said = "" if kind_read is None else f" ({kind_read})"
                raise UserError(
                    f"{where}: derived '{name}': {kind} reads {wants}; {read} is not{said}"
                )
        types[d.name] = _MAKES.get(kind, pa.float64())
        out.append(d)
    return tuple(out)


def _type_read(read: str, types: Mapping[str, pa.DataType]) -> pa.DataType | None:
    """The type a derived argument reads: a column's, or for `column.field` the field's of the
    list of structs in that column (None where the column holds no such list)."""
    column, _, field = read.partition(".")
    kind = types[column]
    if not field:
        return kind
    item = kind.value_type if _list(kind) else None
    if item is None or not pa.types.is_struct(item) or item.get_field_index(field) < 0:
        return None
    return item.field(field).type


def _expectation(item: Any, columns: set[str], where: Path) -> ExpectationDef:
    if not (isinstance(item, dict) and len(item) == 1):
        raise UserError(f"{where}: each expectation must be one {{expect_...: {{arguments}}}}")
    name, kwargs = next(iter(item.items()))
    known = expectation_arguments()
    if name not in known:
        raise UserError(f"{where}: unknown expectation '{name}'{did_you_mean(str(name), known)}")
    at = At(where, str(name))
    kwargs = mapping(kwargs, at, "a mapping of its arguments ({column: ...})")
    extra = [str(a) for a in kwargs if a not in known[name]]
    if extra:
        meant = did_you_mean(extra[0], known[name])
        raise UserError(f"{where}: {name}: unknown argument '{extra[0]}'{meant}")
    column_list = kwargs.get("column_list", [])
    if not isinstance(column_list, list):
        raise (at / "column_list").error(f"expected a list of columns, got {describe(column_list)}")
    named = [text(kwargs[a], at / a, "a column name") for a in _COLUMN_ARGS if a in kwargs]
    named += [text(c, at / "column_list", "column names") for c in column_list]
    unknown = [c for c in named if c not in columns]
    if unknown:
        meant = did_you_mean(unknown[0], columns)
        raise UserError(f"{where}: {name}: unknown column '{unknown[0]}'{meant}")
    return ExpectationDef(str(name), dict(kwargs))


def load_suite_def(path: Path, schema: pa.Schema) -> SuiteDef:
    """Read one suite file and check it against the table's columns (`schema`: its Arrow
    schema, `TableDef.arrow_schema`); a user error names the file and what is wrong."""
    raw = mapping(read_yaml(path), At(path), "a mapping (table, expectations)", known=_SUITE_KEYS)
    if raw.get("table") != path.stem:
        raise UserError(f"{path}: 'table' must be '{path.stem}', the file's name")
    finite = tuple(f.name for f in schema if has_floats(f.type))
    types = {f.name: f.type for f in schema}
    taken = [n + FINITE_SUFFIX for n in finite if n + FINITE_SUFFIX in types]
    if taken:
        raise UserError(f"{path}: column '{taken[0]}' clashes with a finiteness check's name")
    types |= {n + FINITE_SUFFIX: pa.bool_() for n in finite}
    derived = _derived(raw.get("derived"), types, path)
    columns = set(types)
    items = raw.get("expectations") or []
    if not isinstance(items, list) or not items:
        raise UserError(f"{path}: 'expectations' must be a non-empty list")
    checks = tuple(_expectation(i, columns, path) for i in items)
    return SuiteDef(path.stem, path, derived, checks, finite)


def load_suite_defs(
    schemas: Mapping[str, pa.Schema], folder: Path, *, only: Collection[str] | None = None
) -> dict[str, SuiteDef]:
    """The suite of every table that has one (or of those `only` names), by table name
    (`schemas`: each table's Arrow schema)."""
    suites: dict[str, SuiteDef] = {}
    for path in sorted(folder.glob("*.yaml")):
        if only is not None and path.stem not in only:
            continue
        if path.stem not in schemas:
            raise UserError(f"{path}: no table '{path.stem}' in tables/")
        suites[path.stem] = load_suite_def(path, schemas[path.stem])
    return suites
