"""Session rules, without Spark: tables of events in, session rows out."""

from __future__ import annotations

from datetime import timedelta

import pytest

from handlers.sessions import SessionHandler, SessionState

# 2019-06-20 00:46:01 UTC in microseconds since the epoch.
T0_US = 1_560_991_561_000_000
KEY = ("1028_CId",)


def at(seconds: float) -> int:
    return T0_US + int(seconds * 1_000_000)


def ev(seconds: float, logged_out: bool = False, item_index: int = 0) -> dict:
    return {"event_time": at(seconds), "logged_out": logged_out, "item_index": item_index}


def columns(events: list[dict]) -> dict[str, list]:
    """The handler's input: its columns, one list each."""
    return {name: [e[name] for e in events] for name in SessionHandler.columns}


def summary(rows) -> list[tuple]:
    return sorted(
        (r.session_start, r.total_events, r.logged_in, r.end_reason, r.session_end) for r in rows
    )


@pytest.mark.parametrize(
    ("events", "expected_rows", "open_after"),
    [
        # The seed's scenario: two adds, then an add with Source LoggedOut.
        (
            [ev(0), ev(1), ev(241, logged_out=True)],
            [(at(0), 3, False, "logout", at(241))],
            False,
        ),
        # Still open: one row with no end.
        ([ev(0), ev(60)], [(at(0), 2, True, None, None)], True),
        # A gap longer than the timeout inside one batch splits the session.
        (
            [ev(0), ev(10), ev(10 + 301)],
            [(at(0), 2, False, "timeout", at(10 + 300)), (at(311), 1, True, None, None)],
            True,
        ),
        # Exactly the timeout is not longer than it: same session.
        ([ev(0), ev(300)], [(at(0), 2, True, None, None)], True),
        # After a logout the next event opens a new session.
        (
            [ev(0, logged_out=True), ev(5)],
            [(at(0), 1, False, "logout", at(0)), (at(5), 1, True, None, None)],
            True,
        ),
        # A Purchase line of three items counts once.
        (
            [ev(0), ev(5), ev(5, item_index=1), ev(5, item_index=2)],
            [(at(0), 2, True, None, None)],
            True,
        ),
        # ... also when it logs out: its further items do not open a new session.
        (
            [ev(0, logged_out=True), ev(0, logged_out=True, item_index=1)],
            [(at(0), 1, False, "logout", at(0))],
            False,
        ),
    ],
)
def test_update(events, expected_rows, open_after):
    step = SessionHandler().update(KEY, None, columns(events))
    assert summary(step.outputs) == expected_rows
    assert (step.state is not None) == open_after


def test_rows_are_tuples_in_output_schema_order():
    (row,) = SessionHandler().update(KEY, None, columns([ev(0)])).outputs
    assert tuple(row) == (KEY[0], at(0), at(0), 1, True, None, None)
    assert row._fields == (
        "customer_id",
        "session_start",
        "last_event_time",
        "total_events",
        "logged_in",
        "end_reason",
        "session_end",
    )


def test_events_are_counted_per_line_and_timer_is_last_event_plus_timeout():
    state = SessionState(at(0), at(30), 4)
    step = SessionHandler().update(KEY, state, columns([ev(40), ev(50)]))
    assert step.state == SessionState(at(0), at(50), 6)
    assert step.timer_us == at(50 + 300)


def test_out_of_order_event_keeps_the_session_start():
    state = SessionState(at(10), at(20), 2)
    step = SessionHandler().update(KEY, state, columns([ev(5)]))
    assert step.state == SessionState(at(10), at(20), 3)


def test_expire_closes_at_last_event_plus_timeout():
    state = SessionState(at(0), at(30), 2)
    step = SessionHandler().expire(KEY, state)
    assert step.state is None
    assert summary(step.outputs) == [(at(0), 2, False, "timeout", at(330))]


@pytest.mark.parametrize(
    ("settings", "gap", "mode"),
    [
        ({}, timedelta(minutes=5), "event_time"),
        ({"session_timeout": "10 minutes"}, timedelta(minutes=10), "event_time"),
        (
            {"session_timeout": "90 s", "session_timeout_mode": "processing_time"},
            timedelta(seconds=90),
            "processing_time",
        ),
    ],
)
def test_settings(settings, gap, mode):
    handler = SessionHandler(settings)
    assert handler.gap == gap
    assert handler.timeout_mode == mode


@pytest.mark.parametrize(
    "settings",
    [{"session_timeout": "soon"}, {"session_timeout_mode": "wall_clock"}],
)
def test_bad_settings_are_refused(settings):
    handler = SessionHandler(settings)
    with pytest.raises(ValueError):
        _ = handler.timeout_mode, handler.gap


def test_custom_timeout_splits_sessions():
    step = SessionHandler({"session_timeout": "1 minute"}).update(
        KEY, None, columns([ev(0), ev(61)])
    )
    assert [r.end_reason for r in step.outputs] == ["timeout", None]
