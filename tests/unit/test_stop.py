"""When a stop request stops a query: after the batch under way, never mid-way through it, and
without waiting for an idle moment that batches running back to back never have."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from engine.runtime import run


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
    monkeypatch.setattr(run.time, "sleep", query.wait)
    run._stop_between_batches(query, timeout_s=60.0)  # type: ignore[arg-type]
    assert query.stopped_after == stopped_after
