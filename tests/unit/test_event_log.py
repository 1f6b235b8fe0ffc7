"""The lake's event log without Spark: idempotent batch events, reading, the `log` command and
SQL over `_event_log`."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pyarrow as pa
import pytest

from engine.commands import main
from engine.lake.event_log import SCHEMA, Event, EventLog, event_lines
from engine.query.duckdb import run_duckdb

T0 = dt.datetime(2026, 11, 23, 12, 0, tzinfo=dt.UTC)


def at(seconds: int) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


# Expectation counts of batch 1 (none in batch 0): rows checked, dropped, and per rule; and
# the rules by action, which say that `known` warned (its 5 rows were kept).
CHECKS = [
    {},
    {
        "expectations": {
            "checked_lines": {"rows": 97, "dropped": 2, "in_range": 2, "finite": 0, "known": 5}
        },
        "rules": {"checked_lines": {"drop": ["in_range", "finite"], "warn": ["known"]}},
    },
]


@pytest.fixture
def lake(tmp_path: Path) -> Path:
    log = EventLog(tmp_path)
    log.append([Event("run_start", "r1", "server_logs", status="started", event_time=at(0),
                      details={"run": {"once": True, "writer": "spark"}})])  # fmt: skip
    for batch in (0, 1):
        event = Event(
            "batch", "r1", "server_logs", query="main", batch_id=batch, rows_in=100,
            rows_out=90 + batch, duplicates=3, late=0, state_rows=40, duration_ms=1500,
            watermark=at(-60) if batch else None, event_time=at(10 + batch),
            details={"rows_written": {"events": 90 + batch}, **CHECKS[batch]},
        )  # fmt: skip
        assert log.append([event], batch=("server_logs.main.c1", batch))
    log.append([Event("run_stop", "r1", "server_logs", status="finished", event_time=at(20),
                      details={"rows_written": {"events": 181, "quarantine": 0}})])  # fmt: skip
    log.append([Event("quality", "q1", table_name="sessions", status="failed", event_time=at(30),
                      details={"failed": ["expect_x(y) 2 unexpected"]})])  # fmt: skip
    log.append([Event("run_start", "r2", "sensor_cep", status="started", event_time=at(40))])
    # A validation of a sensor_cep table: sensor_cep's, not server_logs'.
    log.append([Event("quality", "q2", table_name="sensor_samples", status="passed",
                      event_time=at(50))])  # fmt: skip
    return tmp_path


def test_a_batch_is_logged_once(lake: Path) -> None:
    again = Event("batch", "r3", "server_logs", query="main", batch_id=1, event_time=at(50))
    assert not EventLog(lake).append([again], batch=("server_logs.main.c1", 1))
    assert EventLog(lake).logged("server_logs.main.c1") == 1
    rows = EventLog(lake).read().to_pylist()
    assert [(r["kind"], r["batch_id"]) for r in rows if r["kind"] == "batch"] == [
        ("batch", 0),
        ("batch", 1),
    ]


def test_read_by_pipeline_and_last(lake: Path) -> None:
    log = EventLog(lake)
    # A pipeline's events, and the validations of the tables it writes (a validation names a
    # table, not a pipeline).
    tables = ["events", "sessions"]
    assert [r["kind"] for r in log.read(pipeline="server_logs", tables=tables).to_pylist()] == [
        "run_start", "batch", "batch", "run_stop", "quality",
    ]  # fmt: skip
    assert [r["run_id"] for r in log.read(pipeline="server_logs").to_pylist()] == ["r1"] * 4
    assert [r["run_id"] for r in log.read(last=2).to_pylist()] == ["r2", "q2"]
    assert EventLog(lake / "none").read().num_rows == 0


def test_event_lines_read_as_a_history(lake: Path) -> None:
    lines = event_lines(EventLog(lake).read(pipeline="server_logs", tables=["sessions"]))
    assert lines == [
        "2026-11-23 12:00:00  server_logs              run_start    once True, writer spark",
        "2026-11-23 12:00:10  server_logs.main         batch 0      100 in, 90 out, 3 duplicates,"
        " 40 state rows, 1,500 ms",
        "2026-11-23 12:00:11  server_logs.main         batch 1      100 in, 91 out, 3 duplicates,"
        " 40 state rows, watermark 2026-11-23 11:59:00, 1,500 ms, checked_lines: 97 checked,"
        " 2 dropped (in_range 2), warned: known 5",
        "2026-11-23 12:00:20  server_logs              run_stop     finished; rows written:"
        " events 181, quarantine 0",
        "2026-11-23 12:00:30  -                        quality      sessions: failed"
        " (expect_x(y) 2 unexpected)",
    ]


def test_sql_over_the_event_log(lake: Path) -> None:
    sql = (
        "SELECT pipeline, count(*) AS batches, sum(rows_out) AS rows_out FROM _event_log "
        "WHERE kind = 'batch' GROUP BY pipeline"
    )
    assert run_duckdb(sql, lake).to_pylist() == [
        {"pipeline": "server_logs", "batches": 2, "rows_out": 181}
    ]
    details = run_duckdb("SELECT details FROM _event_log WHERE batch_id = 1", lake)
    assert json.loads(details.column(0)[0].as_py()) == {"rows_written": {"events": 91}, **CHECKS[1]}
    in_range = (
        "SELECT sum(CAST(get_json_object(details, '$.expectations.checked_lines.in_range') AS INT))"
        " FROM _event_log"
    )
    assert run_duckdb(in_range, lake).column(0)[0].as_py() == 2


def test_log_command(lake: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["log", "sensor_cep", "--lake", str(lake)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split()[3] for line in out] == ["run_start", "quality"]
    assert out[1].endswith("sensor_samples: passed")
    # A pipeline that never ran on the lake has no events, whatever was validated there.
    assert main(["log", "customer_spend", "--lake", str(lake)]) == 0
    assert capsys.readouterr().out == f"no events of customer_spend in {lake} (a run writes them)\n"
    assert main(["log", "--last", "2", "--lake", str(lake), "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["pipeline"], r["kind"]) for r in rows] == [
        ("sensor_cep", "run_start"),
        (None, "quality"),
    ]
    # A pipeline of a project folder of one's own, named without its --pipelines: its runs,
    # and the validations of the tables they wrote to.
    EventLog(lake).append([
        Event("run_start", "r3", "payments", status="started", event_time=at(60)),
        Event("run_stop", "r3", "payments", status="finished", event_time=at(70),
              details={"rows_written": {"payments": 4, "kafka:paid": 4}}),
        Event("quality", "q3", table_name="payments", status="passed", event_time=at(80)),
        Event("quality", "q3", table_name="events", status="passed", event_time=at(80)),
    ])  # fmt: skip
    assert main(["log", "payments", "--lake", str(lake)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split()[3] for line in out] == ["run_start", "run_stop", "quality"]
    assert out[2].endswith("payments: passed")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["log", "nope"], "error: unknown pipeline 'nope' in "),
        (["log", "--last", "0"], "error: argument --last: must be at least 1, got 0"),
        (["log", "--lake", "/no/such/lake"], "error: --lake: no lake at /no/such/lake"),
    ],
)
def test_log_command_errors(
    lake: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    if "--lake" not in args:
        args = [*args, "--lake", str(lake)]
    assert main(args) == 2
    assert capsys.readouterr().err.startswith(message)


def test_an_event_without_rule_actions_names_its_broken_rules_apart() -> None:
    # Logged before batches recorded what each rule does: no rule is claimed as dropped.
    counts = {"records": {"rows": 8, "dropped": 3, "has_id": 2, "known_currency": 1}}
    event = Event("batch", "r", "shop", query="main", batch_id=0, event_time=T0,
                  details={"expectations": counts})  # fmt: skip
    table = pa.Table.from_pylist([event.row()], schema=SCHEMA)
    assert event_lines(table)[0].endswith(
        "batch 0      records: 8 checked, 3 dropped, broken: has_id 2, known_currency 1"
    )
