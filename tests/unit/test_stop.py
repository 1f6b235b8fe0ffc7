"""When a stop request stops a query: after the batch under way, never mid-way through it, and
without waiting for an idle moment that batches running back to back never have."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from engine.definitions.pipeline import QuerySpec
from engine.runtime import query_control


class ScriptedQuery:
    """A streaming query whose status follows a script, one entry per poll interval (trigger
    active, last batch id); the last entry holds from then on."""

    def __init__(self, script: list[tuple[bool, int | None]]) -> None:
        self.script = script
        self.waits = 0
        self.stopped_after: int | None = None

    def wait(self, _seconds: float) -> None:
        self.waits += 1

    def _now(self) -> tuple[bool, int | None]:
        return self.script[min(self.waits, len(self.script) - 1)]

    @property
    def isActive(self) -> bool:
        return self.stopped_after is None

    @property
    def status(self) -> dict[str, bool]:
        return {"isTriggerActive": self._now()[0]}

    @property
    def lastProgress(self) -> SimpleNamespace | None:
        batch = self._now()[1]
        return None if batch is None else SimpleNamespace(batchId=batch)

    def stop(self) -> None:
        assert self.stopped_after is None, "stopped twice"
        self.stopped_after = self.waits


@pytest.mark.parametrize(
    ("script", "stopped_after"),
    [
        # Between batches: stopped at once.
        ([(False, 4)], 0),
        # A batch under way, then an idle moment: stopped in it.
        ([(True, 4), (True, 4), (False, 5)], 2),
        # Batches back to back (each longer than the trigger): stopped as batch 5 has ended
        # and 6 starts, not when the wait for an idle moment ran out.
        ([(True, 4), (True, 4), (True, 5)], 2),
        # Batch 0 under way (no progress yet): stopped once it has ended.
        ([(True, None), (True, None), (True, 0)], 2),
    ],
)
def test_a_stop_waits_for_the_batch_under_way_only(
    monkeypatch: pytest.MonkeyPatch, script: list[tuple[bool, int | None]], stopped_after: int
) -> None:
    query = ScriptedQuery(script)
    monkeypatch.setattr(query_control.time, "sleep", query.wait)
    query_control.stop_between_batches(query, timeout_s=60.0)  # type: ignore[arg-type]
    assert query.stopped_after == stopped_after


BEFORE, AFTER = "2000-01-01T00:00:00.000Z", "2100-01-01T00:00:00.000Z"


class ScriptedDrain(ScriptedQuery):
    """A socket query for `_drain`: per poll (trigger active, data available, the last
    progress's trigger start: BEFORE or AFTER the stop request, or None)."""

    def __init__(self, script: list[tuple[bool, bool, str | None]]) -> None:
        super().__init__([(active, None) for active, _, _ in script])
        self.drain_script = script

    @property
    def status(self) -> dict[str, bool]:
        active, available, _ = self.drain_script[min(self.waits, len(self.script) - 1)]
        return {"isTriggerActive": active, "isDataAvailable": available}

    @property
    def lastProgress(self) -> SimpleNamespace | None:
        started = self.drain_script[min(self.waits, len(self.script) - 1)][2]
        return None if started is None else SimpleNamespace(timestamp=started)


@pytest.mark.parametrize(
    ("script", "returned_at"),
    [
        # Batches back to back, each longer than the trigger: a trigger is always active.
        # Done once a batch planned after the stop has ended, not when the wait ran out.
        ([(True, True, BEFORE), (True, True, BEFORE), (True, True, AFTER)], 2),
        # The batch under way when the stop came ends; the next, planned after it, ends.
        (
            [
                (True, True, BEFORE),
                (False, True, BEFORE),
                (True, True, BEFORE),
                (False, True, AFTER),
            ],
            3,
        ),
    ],
)
def test_a_socket_drain_ends_with_the_batch_planned_after_the_stop(
    monkeypatch: pytest.MonkeyPatch, script: list[tuple[bool, bool, str | None]], returned_at: int
) -> None:
    query = ScriptedDrain(script)
    monkeypatch.setattr(query_control.time, "sleep", query.wait)
    query_control.drain(query, interval_s=5.0, timeout_s=60.0)  # type: ignore[arg-type]
    assert query.waits == returned_at


def test_a_socket_drain_ends_after_a_trigger_that_found_nothing() -> None:
    # Idle, and nothing arrives: no progress is posted; the status after a trigger says so.
    query = ScriptedDrain([(False, False, BEFORE)])
    started = time.monotonic()
    query_control.drain(query, interval_s=0.5, timeout_s=60.0)  # type: ignore[arg-type]
    assert 1.5 <= time.monotonic() - started < 10


@pytest.mark.parametrize(
    ("trigger", "seconds"),
    [(None, 0.0), ("5 seconds", 5.0), ("2 s", 2.0), ("real-time", 0.0), ("real-time 30 s", 0.0)],
)
def test_a_socket_query_waits_its_trigger_interval_before_it_is_drained(trigger, seconds):
    # A socket is no source of Real-Time Mode: such a query runs its batches back to back.
    # The real-time trigger was read as a duration here, and the end of the run failed on it.
    spec = QuerySpec("alerts", {}, trigger=trigger, topics={"alerts": "anomalies"})
    assert query_control.interval_s(spec) == seconds
