"""A project of one's own keeps its handlers in its own `handlers/` folder: they load from
its files, not from the engine's package of that name, and a class that cannot run is
refused when it loads."""

from __future__ import annotations

import inspect
import shutil
from pathlib import Path

import pytest

from engine.definitions.handler import PROJECT_MODULE_PREFIX, load_handler_class
from engine.definitions.pipeline import Registry
from engine.plan import plan_pipeline
from engine.project import PROJECT, Project
from engine.scaffold import init_pipeline

OWN = PROJECT.root / "tests" / "data" / "own_handler" / "running_total.py"


def own_project(root: Path) -> Path:
    """`init shop` in a folder of its own, with the running totals handler on `kept`."""
    init_pipeline("shop", Project(root))
    (root / "handlers").mkdir()
    shutil.copy(OWN, root / "handlers" / "running_total.py")
    (root / "tables" / "currency_totals.sql").write_text(
        "-- Running totals per currency.\nCREATE TABLE currency_totals (\n"
        "  currency STRING COMMENT 'Currency',\n  amount DOUBLE COMMENT 'Total',\n"
        "  records BIGINT COMMENT 'Records'\n) USING DELTA\n"
        "TBLPROPERTIES ('lake.mode' = 'merge', 'lake.key' = 'currency')\n"
    )
    spec = root / "pipelines" / "shop.yaml"
    handler = "handlers:\n  totals:\n    class: handlers.running_total:RunningTotal\n"
    text = spec.read_text().replace("tables:", f"{handler}    input: kept\ntables:")
    table = "  currency_totals: totals\n"
    spec.write_text(
        text.replace("  quarantine: quarantine\n", f"  quarantine: quarantine\n{table}")
    )
    return root


def test_a_handler_loads_from_the_projects_own_file(tmp_path: Path):
    root = own_project(tmp_path)
    cls = load_handler_class("handlers.running_total:RunningTotal", project=root)
    assert cls.__module__.startswith(PROJECT_MODULE_PREFIX)
    assert inspect.getsourcefile(cls) == str(root / "handlers" / "running_total.py")
    # The engine's own handlers still load by import, for its project and where the
    # project has no such file.
    sessions = load_handler_class("handlers.sessions:SessionHandler", project=root)
    assert sessions.__module__ == "handlers.sessions"
    state = cls.state_type(2.5, 1)
    handler = cls()
    assert handler.state_from_row(handler.state_to_row(state)) == state


def test_a_handler_over_stateless_views_plans_beside_the_quarantine(tmp_path: Path):
    # The quarantine reads `lines`, above the handler's input: it was refused as not
    # computable from the query's streaming rows.
    plan = plan_pipeline(Registry(own_project(tmp_path) / "pipelines").get("shop"), once=True)
    query = plan.queries["main"]
    assert {o.view for o in query.outputs if o.view} == {"lines"}
    assert [o.handlers.names for o in query.outputs if o.handlers] == [("totals",)]


# (the module's text, what loading it says)
BROKEN = [
    ("class RunningTotal(:\n", "cannot load handlers.broken:RunningTotal (SyntaxError: "),
    # Its file named, not the module's name inside the engine.
    ("X = 1\n", "cannot load handlers.broken:RunningTotal: /"),
    # A misspelt type: Spark said `Unsupported data type "BIGIN"` at the run, naming nothing.
    (
        "from engine.definitions.handler import StateHandler\n"
        "class RunningTotal(StateHandler):\n    key = columns = ('x',)\n"
        "    state_type = tuple\n    state_schema = 'n BIGIN'\n    output_schema = 'a INT'\n",
        "handlers.broken:RunningTotal: state_schema: not a schema Spark reads (at 'BIGIN'): "
        "'n BIGIN'",
    ),
    # A lone string was read one letter at a time: six unknown columns c, u, r, ...
    (
        "from engine.definitions.handler import StateHandler\n"
        "class RunningTotal(StateHandler):\n    key = ('currency')\n    columns = ('x',)\n"
        "    state_type = tuple\n    state_schema = output_schema = 'a INT'\n",
        "handlers.broken:RunningTotal: key must be a tuple of column names, e.g. ('currency',), "
        "not 'currency'",
    ),
    (
        "from engine.definitions.handler import StateHandler\n"
        "class RunningTotal(StateHandler):\n    key = ('currency',)\n",
        "handlers.broken:RunningTotal does not declare columns, state_type, state_schema, "
        "output_schema",
    ),
    (
        "from engine.definitions.handler import StateHandler\n"
        "class RunningTotal(StateHandler):\n    key = columns = ('currency',)\n"
        "    state_type = dict\n    state_schema = output_schema = 'a INT'\n",
        "handlers.broken:RunningTotal: state_type <class 'dict'> is not a dataclass or NamedTuple",
    ),
    # A field added to the dataclass alone: Spark's error at the first batch, or at a restart.
    (
        "import dataclasses\nfrom engine.definitions.handler import StateHandler\n"
        "@dataclasses.dataclass\nclass Total:\n    amount: float\n    records: int\n"
        "    last: str\n"
        "class RunningTotal(StateHandler):\n    key = columns = ('currency',)\n"
        "    state_type = Total\n    state_schema = 'amount DOUBLE, records BIGINT'\n"
        "    output_schema = 'a INT'\n",
        "handlers.broken:RunningTotal: state_type Total's fields (amount, records, last) do not "
        "match state_schema's columns (amount, records): the state is stored by position, so "
        "name them alike in the same order (or override state_to_row and state_from_row)",
    ),
    # Two fields swapped: each would read the other's stored value.
    (
        "from typing import NamedTuple\nfrom engine.definitions.handler import StateHandler\n"
        "class Total(NamedTuple):\n    records: int\n    amount: float\n"
        "class RunningTotal(StateHandler):\n    key = columns = ('currency',)\n"
        "    state_type = Total\n    state_schema = 'amount DOUBLE, records BIGINT'\n"
        "    output_schema = 'a INT'\n",
        "handlers.broken:RunningTotal: state_type Total's fields (records, amount) do not match "
        "state_schema's columns (amount, records)",
    ),
]


@pytest.mark.parametrize(("text", "said"), BROKEN)
def test_a_handler_that_cannot_run_is_refused_as_it_loads(tmp_path: Path, text: str, said: str):
    (tmp_path / "handlers").mkdir()
    (tmp_path / "handlers" / "broken.py").write_text(text)
    with pytest.raises(ValueError) as caught:
        load_handler_class("handlers.broken:RunningTotal", project=tmp_path)
    assert str(caught.value).startswith(said)


def test_a_state_with_its_own_row_mapping_may_name_its_fields_otherwise(tmp_path: Path):
    (tmp_path / "handlers").mkdir()
    (tmp_path / "handlers" / "own.py").write_text(
        "import json\nfrom typing import NamedTuple\n"
        "from engine.definitions.handler import StateHandler\n"
        "class Seen(NamedTuple):\n    products: dict\n"
        "class Carts(StateHandler):\n    key = columns = ('customer',)\n"
        "    state_type = Seen\n    state_schema = 'products_json STRING'\n"
        "    output_schema = 'a INT'\n"
        "    def state_to_row(self, state):\n        return (json.dumps(state.products),)\n"
        "    def state_from_row(self, row):\n        return Seen(json.loads(row[0]))\n"
    )
    cls = load_handler_class("handlers.own:Carts", project=tmp_path)
    handler = cls()
    assert handler.state_from_row(handler.state_to_row(cls.state_type({"p": 2}))) == ({"p": 2},)


# (the handler's timeout_mode property's body, what lint says of the pipeline)
TIMEOUTS = [
    # Spark refused it at the run, naming withWatermark(), a DataFrame API.
    (
        'return "event_time"',
        "handler totals: timeout_mode event_time needs a watermark on its input: add WATERMARK "
        "col DELAY OF INTERVAL ... to the FROM of view kept or a view above it",
    ),
    # These were a bare `error: 'idle_mode'` / `error: 'eventtime'`, exit 1, at lint and run.
    (
        'return self.settings["idle_mode"]',
        "handler totals: KeyError: 'idle_mode' (reading its timeout_mode and timeout)",
    ),
    (
        'return "eventtime"',
        "handler totals: timeout_mode must be none, event_time or processing_time, not 'eventtime'",
    ),
]


@pytest.mark.parametrize(("body", "said"), TIMEOUTS)
def test_a_handler_whose_timeout_cannot_be_set_up_is_a_lint_error(
    tmp_path: Path, body: str, said: str
):
    from engine.plan import check_pipeline

    root = own_project(tmp_path)
    with (root / "handlers" / "running_total.py").open("a") as module:
        module.write(f"\n    @property\n    def timeout_mode(self):\n        {body}\n")
    plan, findings = check_pipeline(Registry(root / "pipelines").get("shop"))
    assert plan is None
    assert [f.message for f in findings if f.severity == "error"] == [said]


def test_a_class_path_without_its_colon_says_how_to_write_it(tmp_path: Path):
    root = own_project(tmp_path)
    with pytest.raises(ValueError, match=r"^class 'handlers.running_total.RunningTotal': write "):
        load_handler_class("handlers.running_total.RunningTotal", project=root)
