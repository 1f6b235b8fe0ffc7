"""Activity runs (seed 001): a user's consecutive events with one activity, as spans."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

from engine.definitions.handler import Columns, StateHandler, Step

__all__ = ["ActivityRun", "ActivityRunHandler", "SpanRow"]


@dataclass(frozen=True)
class ActivityRun:
    """A user's current run: its number (1, 2, ...), activity, first and last time, events."""

    span_no: int
    activity: str
    start_us: int
    end_us: int
    events: int


class SpanRow(NamedTuple):
    """A row of `ActivityRunHandler.output_schema`; times in microseconds since the epoch."""

    user: str
    span_no: int
    activity: str
    span_start: int
    span_end: int
    events: int
    closed: bool


class ActivityRunHandler(StateHandler[ActivityRun]):
    """Applies a batch's events in event-time order: the run's activity extends the run; a
    later event with another activity closes it and opens the next; an older event with
    another activity is ignored and counted (`ignored_older_other_activity`)."""

    key = ("user",)
    columns = ("event_time", "activity")
    order_by = ("event_time",)
    counted = ("ignored_older_other_activity",)
    state_type = ActivityRun
    state_schema = "span_no INT, activity STRING, start_us BIGINT, end_us BIGINT, events BIGINT"
    output_schema = (
        "user STRING, span_no INT, activity STRING, span_start TIMESTAMP, span_end TIMESTAMP, "
        "events BIGINT, closed BOOLEAN"
    )

    def update(
        self, key: tuple[Any, ...], state: ActivityRun | None, events: Columns
    ) -> Step[ActivityRun]:
        rows: list[SpanRow] = []  # runs closed in this batch, in span order
        ignored = 0
        # The current run as plain locals: this loop runs once per event.
        has_run, touched = state is not None, False
        span_no, activity, start, end, n = (
            (state.span_no, state.activity, state.start_us, state.end_us, state.events)
            if state
            else (0, "", 0, 0, 0)
        )
        for when, what in zip(events["event_time"], events["activity"], strict=True):
            if not has_run:
                span_no, activity, start, end, n, has_run = 1, what, when, when, 1, True
            elif what == activity:
                start, end, n = min(start, when), max(end, when), n + 1
            elif when > end:
                rows.append(SpanRow(key[0], span_no, activity, start, end, n, True))
                span_no, activity, start, end, n = span_no + 1, what, when, when, 1
            else:
                ignored += 1
                continue
            touched = True
        run = ActivityRun(span_no, activity, start, end, n) if has_run else None
        if touched:
            # Only the current run can still be open; it is emitted when an event changed it.
            rows.append(SpanRow(key[0], span_no, activity, start, end, n, False))
        counts = {"ignored_older_other_activity": ignored} if ignored else {}
        return Step(state=run, outputs=rows, counts=counts)
