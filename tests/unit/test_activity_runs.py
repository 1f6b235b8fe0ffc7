"""The activity-run rules as tables of events and expected spans (no Spark)."""

from __future__ import annotations

import pytest

from handlers.activity_runs import ActivityRun, ActivityRunHandler

# 2015-02-23 10:18:53 UTC in microseconds since the epoch.
T0_US = 1_424_686_733_000_000


def ev(second: float, activity: str) -> dict:
    return {"event_time": T0_US + int(second * 1_000_000), "activity": activity}


def columns(events: list[dict]) -> dict[str, list]:
    """The handler's input: its columns, one list each."""
    return {name: [e[name] for e in events] for name in ActivityRunHandler.columns}


def span(no: int, activity: str, start: float, end: float, events: int, closed: bool) -> tuple:
    return (no, activity, start, end, events, closed)


def spans(rows) -> list[tuple]:
    def sec(t: int) -> float:
        return (t - T0_US) / 1_000_000

    return [
        span(r.span_no, r.activity, sec(r.span_start), sec(r.span_end), r.events, r.closed)
        for r in rows
    ]


@pytest.mark.parametrize(
    ("batches", "expected_rows", "ignored"),
    [
        # One activity: one open span, extended by each event.
        ([[ev(0, "stand"), ev(1, "stand")]], [span(1, "stand", 0, 1, 2, False)], 0),
        # A later event with another activity closes the run and opens the next, in one batch.
        (
            [[ev(0, "stand"), ev(1, "stand"), ev(2, "walk")]],
            [span(1, "stand", 0, 1, 2, True), span(2, "walk", 2, 2, 1, False)],
            0,
        ),
        # An older event with another activity (next batch) is ignored and counted.
        ([[ev(0, "walk"), ev(2, "walk")], [ev(1, "sit")]], [], 1),
        # An older event with the run's activity extends the run backwards.
        ([[ev(2, "walk")], [ev(1, "walk")]], [span(1, "walk", 1, 2, 2, False)], 0),
        # Three runs across two batches: only the spans that changed are emitted.
        (
            [[ev(0, "bike"), ev(3, "bike")], [ev(10, "stand"), ev(11, "sit")]],
            [
                span(1, "bike", 0, 3, 2, True),
                span(2, "stand", 10, 10, 1, True),
                span(3, "sit", 11, 11, 1, False),
            ],
            0,
        ),
    ],
)
def test_runs(batches, expected_rows, ignored):
    handler = ActivityRunHandler()
    state, step = None, None
    for events in batches:
        step = handler.update(("a",), state, columns(events))
        state = step.state
    assert spans(step.outputs) == expected_rows
    assert step.counts.get("ignored_older_other_activity", 0) == ignored
    assert all(r.user == "a" for r in step.outputs)


def test_rows_are_tuples_in_output_schema_order():
    (row,) = ActivityRunHandler().update(("a",), None, columns([ev(1, "walk")])).outputs
    assert tuple(row) == ("a", 1, "walk", T0_US + 1_000_000, T0_US + 1_000_000, 1, False)


def test_only_ignored_events_keep_the_run():
    run = ActivityRun(2, "walk", T0_US, T0_US + 5_000_000, 3)
    step = ActivityRunHandler().update(("a",), run, columns([ev(1, "sit")]))
    assert step.state == run and step.outputs == []
    assert step.counts == {"ignored_older_other_activity": 1}


def test_state_round_trip():
    handler = ActivityRunHandler()
    run = ActivityRun(2, "walk", 1, 5, 3)
    assert handler.state_from_row(handler.state_to_row(run)) == run
