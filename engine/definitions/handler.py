"""The handler contract: a subclass declares keys, state, output schema and timeout.

Decisions live in plain methods over plain values (lists of ints, strings, floats; times as
int microseconds since the epoch), so they are unit-tested without Spark;
`engine.runtime.handler_adapter` runs handlers inside Spark.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import importlib.util
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar, Generic, Literal, TypeVar

from engine.definitions.durations import parse_duration
from engine.project import PROJECT

__all__ = [
    "PROJECT_MODULE_PREFIX",
    "STATE_BUCKETS",
    "Columns",
    "StateHandler",
    "Step",
    "TimeoutMode",
    "load_handler_class",
]

TimeoutMode = Literal["none", "event_time", "processing_time"]
#: Handler state is kept by bucket of keys (a hash of the key), not per key: Spark's Python
#: state API costs milliseconds per group and batch. Enough buckets to spread over a cluster's
#: cores, few enough that a batch makes few calls. A checkpoint is bound to this number.
STATE_BUCKETS = 64
StateT = TypeVar("StateT")
#: The module names a project's own handler files are loaded under (see load_handler_class).
PROJECT_MODULE_PREFIX = "_streamlake_project_"
#: A key's events of one batch, column-wise: name -> values (all the same length), plain Python
#: values, timestamps as int microseconds since the epoch (None for NULL).
Columns = Mapping[str, Sequence[Any]]


@dataclass(frozen=True)
class Step(Generic[StateT]):
    """What a handler decided for one key: new state (None drops it), rows out, next timer,
    and counts for the run report."""

    state: StateT | None
    #: Rows out, each a tuple in `output_schema` order; timestamps as int microseconds or None.
    outputs: Sequence[tuple[Any, ...]] = field(default_factory=tuple)
    #: Event-time timer in microseconds since the epoch (event_time timeouts only).
    timer_us: int | None = None
    #: Events counted rather than emitted (e.g. ignored ones), summed into the run's report;
    #: each name must be one of the handler's `counted`.
    counts: Mapping[str, int] = field(default_factory=dict)


class StateHandler(Generic[StateT]):
    """Base of all handlers. Subclasses set the class attributes and implement `update`."""

    #: Grouping columns of the input view; one state per distinct key.
    key: ClassVar[tuple[str, ...]]
    #: Input columns the rules read, besides the key; only these are sent to Python.
    columns: ClassVar[tuple[str, ...]]
    #: Events of a key within a batch are applied in this column order (a stable sort).
    order_by: ClassVar[tuple[str, ...]] = ()
    #: The state dataclass (or NamedTuple); its fields, in order, match `state_schema`.
    state_type: ClassVar[type]
    #: Spark DDL of the state row.
    state_schema: ClassVar[str]
    #: Spark DDL of the rows the handler emits.
    output_schema: ClassVar[str]
    #: Settings this handler reads, with their defaults (overridable per pipeline / --conf).
    defaults: ClassVar[Mapping[str, str]] = {}
    #: The names its steps may count (`Step.counts`): Spark sums them as the batch runs.
    counted: ClassVar[tuple[str, ...]] = ()

    def __init__(self, settings: Mapping[str, str] | None = None) -> None:
        self.settings = {**self.defaults, **(settings or {})}

    def duration_setting(self, name: str) -> timedelta:
        """The setting `name` as a duration above zero; a ValueError naming the setting."""
        text = self.settings[name]
        try:
            duration = parse_duration(text)
        except ValueError as err:
            raise ValueError(f"setting {name}: {err}") from None
        if duration.micros <= 0:
            raise ValueError(f"setting {name}: a duration above zero, not {text!r}")
        return duration.timedelta

    @property
    def timeout_mode(self) -> TimeoutMode:
        """How timers fire: on the event-time watermark, on the wall clock, or never."""
        return "none"

    @property
    def timeout(self) -> timedelta | None:
        """The processing-time timeout duration, when `timeout_mode` is processing_time."""
        return None

    def update(self, key: tuple[Any, ...], state: StateT | None, events: Columns) -> Step:
        """Apply one batch of a key's events (exactly `columns`, in `order_by` order)."""
        raise NotImplementedError

    def expire(self, key: tuple[Any, ...], state: StateT) -> Step:
        """The key's timer fired: decide what to emit and keep. Default: drop the state."""
        return Step(state=None)

    # The adapter stores state as a Spark row; these keep the dataclass <-> tuple mapping here.
    def state_to_row(self, state: StateT) -> tuple[Any, ...]:
        """The state as a tuple in `state_schema` order."""
        if dataclasses.is_dataclass(state):
            return dataclasses.astuple(state)  # type: ignore[call-overload]
        return tuple(state)  # type: ignore[arg-type]  # a NamedTuple

    def state_from_row(self, row: Sequence[Any]) -> StateT:
        """Rebuild the state dataclass from a stored row."""
        return self.state_type(*row)


def load_handler_class(class_path: str, *, project: Path | None = None) -> type[StateHandler]:
    """The handler class named `module:Class`: from the file `<project>/module/path.py` when
    the project (a folder of one's own) has it, else imported; ValueError saying why not."""
    module_name, colon, class_name = class_path.partition(":")
    if not (colon and module_name and class_name):
        raise ValueError(f"class {class_path!r}: write module:Class, e.g. handlers.totals:Totals")
    try:
        module = _project_module(module_name, project) or importlib.import_module(module_name)
    except Exception as err:  # a module's own code may raise anything as it loads
        raise ValueError(f"cannot load {class_path} ({type(err).__name__}: {err})") from None
    cls = getattr(module, class_name, None)
    if cls is None:
        where = getattr(module, "__file__", None) or module_name
        raise ValueError(f"cannot load {class_path}: {where} has no {class_name}")
    if not (isinstance(cls, type) and issubclass(cls, StateHandler)):
        raise ValueError(f"{class_path} is not a StateHandler")
    missing = [a for a in _DECLARED if not hasattr(cls, a)]
    if missing:
        raise ValueError(f"{class_path} does not declare {', '.join(missing)}")
    for schema in ("state_schema", "output_schema"):
        problem = _schema_problem(getattr(cls, schema))
        if problem:
            raise ValueError(f"{class_path}: {schema}: {problem}")
    for names in ("key", "columns", "order_by"):
        value = getattr(cls, names, ())
        # A lone string (`key = "currency"`, `("currency")`) was read one letter at a time.
        if not (isinstance(value, tuple | list) and all(isinstance(v, str) for v in value)):
            raise ValueError(
                f"{class_path}: {names} must be a tuple of column names, e.g. "
                f"({value!r},), not {value!r}"
            )
    state = cls.state_type
    if not (
        dataclasses.is_dataclass(state) or (isinstance(state, type) and issubclass(state, tuple))
    ):
        raise ValueError(f"{class_path}: state_type {state!r} is not a dataclass or NamedTuple")
    problem = _state_fields_problem(cls)
    if problem:
        raise ValueError(f"{class_path}: {problem}")
    return cls


def _state_fields_problem(cls: type[StateHandler]) -> str | None:
    """Why the state's fields do not match `state_schema` under the default row mapping, which
    is by position: a field added to the dataclass alone failed the first batch in Spark's
    words, or at a restart, and two fields swapped read each other's stored values."""
    own_mapping = any(
        getattr(cls, m) is not getattr(StateHandler, m) for m in ("state_to_row", "state_from_row")
    )
    state = cls.state_type
    if dataclasses.is_dataclass(state):
        fields = [f.name for f in dataclasses.fields(state)]
    else:
        fields = list(getattr(state, "_fields", ()))
    if own_mapping or not fields:  # a mapping of its own, or a bare tuple: its names are unknown
        return None
    columns = [c.name for c in _columns(cls.state_schema)]
    if [f.lower() for f in fields] == [c.lower() for c in columns]:
        return None
    return (
        f"state_type {state.__name__}'s fields ({', '.join(fields)}) do not match state_schema's "
        f"columns ({', '.join(columns)}): the state is stored by position, so name them alike "
        "in the same order (or override state_to_row and state_from_row)"
    )


def _schema_problem(ddl: Any) -> str | None:
    """Why `ddl` is not a schema of named, typed columns (`a STRING, b BIGINT`); Spark said it at
    the run, naming no handler, and a misspelt type read as a missing column at `lint`."""
    from sqlglot.errors import SqlglotError

    if not isinstance(ddl, str):
        return f"expected text such as 'a STRING, b BIGINT', not {ddl!r}"
    try:
        columns = _columns(ddl)
    except SqlglotError as err:
        found = getattr(err, "errors", None) or [{}]
        at = found[0].get("highlight")
        return f"not a schema Spark reads{f' (at {at!r})' if at else ''}: {ddl!r}"
    untyped = [c.name for c in columns if c.args.get("kind") is None]
    return f"column(s) {', '.join(untyped)} without a type" if untyped else None


def _columns(ddl: str) -> list[Any]:
    """The column definitions of a schema in Spark DDL (sqlglot's SqlglotError if unreadable)."""
    import sqlglot

    return sqlglot.parse_one(f"CREATE TABLE t ({ddl})", read="spark").this.expressions


#: What a handler class must declare (StateHandler's attributes without a default).
_DECLARED = ("key", "columns", "state_type", "state_schema", "output_schema")


def _project_module(name: str, project: Path | None) -> ModuleType | None:
    """A project's own module, loaded from its file under a name of its own: a project of
    one's own keeps its handlers in `handlers/` as this one does, and the engine's package of
    that name would hide them. The runtime sends such a module to Spark by value."""
    if project is None or project.resolve() == PROJECT.root:
        return None
    file = project.resolve().joinpath(*name.split(".")).with_suffix(".py")
    if not file.is_file():
        return None
    unique = PROJECT_MODULE_PREFIX + hashlib.sha256(str(file).encode()).hexdigest()[:16]
    if unique not in sys.modules:
        spec = importlib.util.spec_from_file_location(unique, file)
        module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        sys.modules[unique] = module
        try:
            spec.loader.exec_module(module)  # type: ignore[union-attr]
        except BaseException:
            del sys.modules[unique]
            raise
    return sys.modules[unique]
