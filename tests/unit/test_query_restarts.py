"""Which stopped queries a run starts again (engine/runtime/retries.py), over queries that stand in
for Spark's: a Python worker that did not start in time is restarted a few times in a row."""

from __future__ import annotations

import io
from collections import Counter
from pathlib import Path

import pytest

from engine.errors import KafkaUnavailable
from engine.lake.event_log import EventLog
from engine.runtime.errors import WorkerStartFailed
from engine.runtime.events import RunRecorder
from engine.runtime.retries import WORKER_RESTARTS, schedule_retries

LATE_WORKER = "Python worker failed to connect back."


class Query:
    """What the run asks of a StreamingQuery: whether it runs, its error, its last progress."""

    def __init__(self, error: str | None = None, *, progress: bool = False) -> None:
        self.isActive = error is None
        self.error = Exception(error) if error else None
        self.lastProgress = {"batchId": 0} if progress else None

    def exception(self) -> Exception | None:
        return self.error


def schedule(queries, retry_at, restarts, lake: Path, *, once: bool = True) -> str:
    out = io.StringIO()
    schedule_retries(
        queries,
        retry_at,
        restarts,
        once=once,
        kafka_servers="",
        view_files={},
        out=out,
        recorder=RunRecorder(lake, "sensor_cep", out),
    )
    return out.getvalue()


def test_a_late_worker_restarts_its_query_three_times_in_a_row_then_fails(tmp_path) -> None:
    restarts: Counter[str] = Counter()
    for n in range(1, WORKER_RESTARTS + 1):
        retry_at: dict[str, float] = {}
        said = schedule({"alerts": Query(LATE_WORKER)}, retry_at, restarts, tmp_path)
        assert said == (
            f"query alerts: Python worker failed to connect back; restarting it ({n} of 3)\n"
        )
        assert list(retry_at) == ["alerts"]
    with pytest.raises(WorkerStartFailed, match=r"^query alerts: Python worker failed"):
        schedule({"alerts": Query(LATE_WORKER)}, {}, restarts, tmp_path)
    logged = [(e["query"], e["status"]) for e in EventLog(tmp_path).read().to_pylist()]
    assert logged == [("alerts", "failed")] * WORKER_RESTARTS


def test_a_batch_after_a_restart_starts_the_count_again(tmp_path) -> None:
    restarts = Counter({"alerts": WORKER_RESTARTS})
    # Still starting: no progress yet, so the count stands.
    schedule({"alerts": Query()}, {}, restarts, tmp_path)
    assert restarts["alerts"] == WORKER_RESTARTS
    schedule({"alerts": Query(progress=True)}, {}, restarts, tmp_path)
    said = schedule({"alerts": Query(LATE_WORKER)}, {}, restarts, tmp_path)
    assert said.endswith("restarting it (1 of 3)\n")


def test_other_errors_end_the_run_and_a_once_run_does_not_wait_for_the_broker(tmp_path) -> None:
    with pytest.raises(RuntimeError, match=r"^query main: \[DIVIDE_BY_ZERO\]"):
        schedule({"main": Query("[DIVIDE_BY_ZERO] no")}, {}, Counter(), tmp_path)
    away = "engine.errors.KafkaUnavailable: kafka broker h:1 unreachable"
    with pytest.raises(KafkaUnavailable):
        schedule({"main": Query(away)}, {}, Counter(), tmp_path)
    retry_at: dict[str, float] = {}
    said = schedule({"main": Query(away)}, retry_at, Counter(), tmp_path, once=False)
    assert said.endswith("; retrying every 5 s\n") and list(retry_at) == ["main"]
