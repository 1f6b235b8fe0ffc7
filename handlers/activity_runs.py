"""Activity runs (seed 001): a user's consecutive events with one activity, as spans."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from handlers.base import Event, StateHandler, Step, from_us, to_us

__all__ = ["ActivityRun", "ActivityRunHandler"]


@dataclass(frozen=True)
class ActivityRun:
    """A user's current run: its number (1, 2, ...), activity, first and last time, events."""

    span_no: int
    activity: str
    start_us: int
    end_us: int
    events: int


class ActivityRunHandler(StateHandler[ActivityRun]):
    """Applies a batch's events in event-time order: the run's activity extends the run; a
    later event with another activity closes it and opens the next; an older event with
    another activity is ignored and counted (`ignored_older_other_activity`)."""

    key = ("user",)
    columns = ("event_time", "activity")
    order_by = ("event_time",)
    state_type = ActivityRun
    state_schema = "span_no INT, activity STRING, start_us BIGINT, end_us BIGINT, events BIGINT"
    output_schema = (
        "user STRING, span_no INT, activity STRING, span_start TIMESTAMP, span_end TIMESTAMP, "
        "events BIGINT, closed BOOLEAN"
    )

    def update(
        self, key: tuple[Any, ...], state: ActivityRun | None, events: Sequence[Event]
    ) -> Step[ActivityRun]:
        run, changed, ignored = state, {}, 0
        for event in events:
            when, activity = to_us(event["event_time"]), event["activity"]
            if run is None:
                run = ActivityRun(1, activity, when, when, 1)
            elif activity == run.activity:
                run = replace(
                    run,
                    start_us=min(run.start_us, when),
                    end_us=max(run.end_us, when),
                    events=run.events + 1,
                )
            elif when > run.end_us:
                changed[run.span_no] = self._row(key, run, closed=True)
                run = ActivityRun(run.span_no + 1, activity, when, when, 1)
            else:
                ignored += 1
                continue
            changed[run.span_no] = self._row(key, run, closed=False)
        counts = {"ignored_older_other_activity": ignored} if ignored else {}
        return Step(state=run, outputs=list(changed.values()), counts=counts)

    @staticmethod
    def _row(key: tuple[Any, ...], run: ActivityRun, *, closed: bool) -> dict[str, Any]:
        return {
            "user": key[0],
            "span_no": run.span_no,
            "activity": run.activity,
            "span_start": from_us(run.start_us),
            "span_end": from_us(run.end_us),
            "events": run.events,
            "closed": closed,
        }
