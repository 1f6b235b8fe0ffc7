"""The project's YAML files (pipeline specs, quality suites) read and checked in one way: a
file that does not parse, a repeated or unknown key and a value of the wrong type are each one
line naming the file and the key, never a Python error or PyYAML's multi-line excerpt."""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Hashable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from engine.errors import UserError

__all__ = [
    "At",
    "describe",
    "mapping",
    "optional",
    "read_yaml",
    "required",
    "scalars",
    "text",
    "text_mapping",
]

#: What a single value may be: text, a number, true/false, a date (YAML reads `2024-06-01` as
#: one), or nothing.
_SCALARS = (str, int, float, bool, dt.date, type(None))


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader, except that a key written twice in one mapping is an error:
    PyYAML keeps the last silently, which loses the user's first setting."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Hashable, yaml.Mark] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # `<<: *base` merges keys that the mapping may override
            key = self.construct_object(key_node, deep=True)
            if not isinstance(key, Hashable):
                continue  # PyYAML's own error names it below
            if key in seen:
                first = seen[key].line + 1
                raise yaml.constructor.ConstructorError(
                    None, None, f"key '{key}' repeated (first at line {first})", key_node.start_mark
                )
            seen[key] = key_node.start_mark
        return super().construct_mapping(node, deep=deep)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def read_yaml(path: Path) -> Any:
    """The document in `path` (None when empty); unreadable bytes, a syntax error or a key
    repeated in one mapping are a UserError `path: line L, column C: problem`."""
    try:
        source = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as err:
        raise UserError(f"{path}: not UTF-8 text (byte {err.start})") from None
    except OSError as err:
        raise UserError(f"{path}: cannot read it: {err.strerror}") from None
    try:
        return yaml.load(source, Loader=_Loader)  # a SafeLoader: plain data only
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = _one_line(err.problem or err.context or "not valid YAML")
        context = ""
        # PyYAML says what it was reading and where that began: for an unclosed bracket,
        # where the bracket is.
        if err.problem and err.context and err.context_mark:
            at = err.context_mark
            context = f" ({_one_line(err.context)} at line {at.line + 1}, column {at.column + 1})"
        raise UserError(f"{path}: {where}{problem}{context}") from None
    except yaml.YAMLError as err:
        raise UserError(f"{path}: not valid YAML: {_one_line(str(err))}") from None


@dataclass(frozen=True)
class At:
    """A place in a YAML file: the file and the dotted key of a value in it ('' for the
    document itself), as the one-line errors name it."""

    path: Path
    key: str = ""

    def __truediv__(self, name: object) -> At:
        return At(self.path, f"{self.key}.{name}" if self.key else str(name))

    def error(self, message: str) -> UserError:
        """`path: key: message` (just `path: message` for the document)."""
        return UserError(
            f"{self.path}: {self.key}: {message}" if self.key else f"{self.path}: {message}"
        )


def describe(value: Any) -> str:
    """What a YAML value is, in the user's words: 'a list', 'the number 5', 'nothing', ..."""
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return f"{str(value).lower()} (a yes/no value)"
    if isinstance(value, int | float):
        return f"the number {value}"
    if isinstance(value, str):
        return f"the text {value!r}"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dt.date):
        return f"the date {value}"
    return type(value).__name__


def mapping(
    value: Any, at: At, what: str = "a mapping", known: Collection[str] | None = None
) -> dict[str, Any]:
    """`value` as a mapping with text keys (nothing counts as an empty one); with `known`, a
    key not in it is an error listing them (a misspelt key would otherwise be ignored)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise at.error(f"expected {what}, got {describe(value)}")
    for key in value:
        if not isinstance(key, str):
            raise at.error(f"key {key} is {describe(key)}, not text; quote it: '{key}'")
        if known is not None and key not in known:
            inside = f" in {at.key}" if at.key else ""
            raise UserError(f"{at.path}: unknown key '{key}'{inside} (known: {', '.join(known)})")
    return value


def text(value: Any, at: At, what: str = "text") -> str:
    """`value` as non-empty text; anything else (a number, a list, nothing) is an error."""
    if not isinstance(value, str) or not value:
        got = "empty text" if value == "" else describe(value)
        raise at.error(f"expected {what}, got {got}")
    return value


def required(spec: Mapping[str, Any], name: str, at: At, what: str = "text") -> str:
    """The text under key `name` of `spec` (the mapping at `at`); absent or empty is
    `missing 'key'`."""
    if spec.get(name) in (None, ""):
        raise UserError(f"{at.path}: missing '{(at / name).key}'")
    return text(spec[name], at / name, what)


def optional(spec: Mapping[str, Any], name: str, at: At, what: str = "text") -> str | None:
    """The text under key `name` of `spec` (the mapping at `at`), None when absent or empty."""
    value = spec.get(name)
    return None if value in (None, "") else text(value, at / name, what)


def text_mapping(value: Any, at: At, what: str, item: str) -> dict[str, str]:
    """A mapping of names to text (`tables:` table -> view): each value must be `item`."""
    return {key: text(v, at / key, item) for key, v in mapping(value, at, what).items()}


def scalars(value: Any, at: At, what: str, allow_none: bool = False) -> dict[str, Any]:
    """A mapping of names to single values (`options:`, `settings:`): a list or mapping as a
    value is an error, and so is an empty one unless `allow_none`."""
    out = mapping(value, at, what)
    for key, item in out.items():
        if not isinstance(item, _SCALARS) or (item is None and not allow_none):
            raise (at / key).error(f"expected a single value, got {describe(item)}")
    return out
