"""The lake's event log without Spark: idempotent batch events, reading, the `log` command and
SQL over `_event_log`."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from engine.cli import main
from engine.lake.event_log import Event, EventLog, event_lines
from engine.query.duckdb import run_duckdb

T0 = dt.datetime(2026, 11, 23, 12, 0, tzinfo=dt.UTC)


def at(seconds: int) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


# Expectation counts of batch 1 (none in batch 0): rows checked, dropped, and per rule.
CHECKS = [
    {},
    {"expectations": {"checked_lines": {"rows": 97, "dropped": 2, "in_range": 2, "finite": 0}}},
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
    assert [r["kind"] for r in log.read(pipeline="server_logs").to_pylist()] == [
        "run_start", "batch", "batch", "run_stop", "quality",
    ]  # fmt: skip
    assert [r["run_id"] for r in log.read(last=2).to_pylist()] == ["q1", "r2"]
    assert EventLog(lake / "none").read().num_rows == 0


def test_event_lines_read_as_a_history(lake: Path) -> None:
    lines = event_lines(EventLog(lake).read(pipeline="server_logs"))
    assert lines == [
        "2026-11-23 12:00:00  server_logs              run_start    once True, writer spark",
        "2026-11-23 12:00:10  server_logs.main         batch 0      100 in, 90 out, 3 duplicates,"
        " 40 state rows, 1,500 ms",
        "2026-11-23 12:00:11  server_logs.main         batch 1      100 in, 91 out, 3 duplicates,"
        " 40 state rows, watermark 2026-11-23 11:59:00, 1,500 ms, checked_lines: 97 checked,"
        " 2 dropped (in_range 2)",
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
    assert [line.split()[3] for line in out] == ["quality", "run_start"]
    assert main(["log", "--last", "1", "--lake", str(lake), "--format", "json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert (row["pipeline"], row["kind"]) == ("sensor_cep", "run_start")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["log", "nope"], "error: unknown pipeline 'nope' (pipelines: "),
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
