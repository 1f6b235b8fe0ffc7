"""Session rules, without Spark: tables of events in, session rows out."""

from __future__ import annotations

from datetime import timedelta

import pytest

from engine.definitions.handler import Step
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


def held(state: SessionState | None) -> str | None:
    """What a step keeps: an open session, a closed one held for its logout, or nothing."""
    if state is None:
        return None
    return "open" if state.ended_us is None else "logout"


@pytest.mark.parametrize(
    ("events", "expected_rows", "held_after"),
    [
        # The seed's scenario: two adds, then an add with Source LoggedOut.
        (
            [ev(0), ev(1), ev(241, logged_out=True)],
            [(at(0), 3, False, "logout", at(241))],
            "logout",
        ),
        # Still open: one row with no end.
        ([ev(0), ev(60)], [(at(0), 2, True, None, None)], "open"),
        # A gap longer than the timeout inside one batch splits the session.
        (
            [ev(0), ev(10), ev(10 + 301)],
            [(at(0), 2, False, "timeout", at(10 + 300)), (at(311), 1, True, None, None)],
            "open",
        ),
        # Exactly the timeout is not longer than it: same session.
        ([ev(0), ev(300)], [(at(0), 2, True, None, None)], "open"),
        # After a logout the next event opens a new session.
        (
            [ev(0, logged_out=True), ev(5)],
            [(at(0), 1, False, "logout", at(0)), (at(5), 1, True, None, None)],
            "open",
        ),
        # A Purchase line of three items counts once.
        (
            [ev(0), ev(5), ev(5, item_index=1), ev(5, item_index=2)],
            [(at(0), 2, True, None, None)],
            "open",
        ),
        # ... also when it logs out: its further items do not open a new session.
        (
            [ev(0, logged_out=True), ev(0, logged_out=True, item_index=1)],
            [(at(0), 1, False, "logout", at(0))],
            "logout",
        ),
        # Two LoggedOut lines at one time: one session of both, not two sessions with one key.
        (
            [ev(0, logged_out=True), ev(0, logged_out=True)],
            [(at(0), 2, False, "logout", at(0))],
            "logout",
        ),
        # ... as for three lines at the logout's time, and the next session starts after it.
        (
            [ev(0), ev(0, logged_out=True), ev(0, logged_out=True), ev(1)],
            [(at(0), 3, False, "logout", at(0)), (at(1), 1, True, None, None)],
            "open",
        ),
    ],
)
def test_update(events, expected_rows, held_after):
    step = SessionHandler().update(KEY, None, columns(events))
    assert summary(step.outputs) == expected_rows
    assert held(step.state) == held_after


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


def test_a_line_in_a_later_batch_not_after_the_logout_counts_in_the_closed_session():
    # The logout closed a session of one line at 0 s; a line at 0 s comes in the next batch
    # (within the watermark). As a session of its own it would have replaced the closed one.
    closed = SessionHandler().update(KEY, None, columns([ev(0, logged_out=True)])).state
    assert closed == SessionState(at(0), at(0), 1, ended_us=at(0))
    step = SessionHandler().update(KEY, closed, columns([ev(0), ev(30)]))
    assert summary(step.outputs) == [
        (at(0), 2, False, "logout", at(0)),
        (at(30), 1, True, None, None),
    ]
    assert step.state == SessionState(at(30), at(30), 1)


def test_a_closed_session_is_held_until_the_watermark_passes_its_logout():
    step = SessionHandler().update(KEY, None, columns([ev(0), ev(20, logged_out=True)]))
    assert step.state == SessionState(at(0), at(20), 2, ended_us=at(20))
    assert step.timer_us == at(20)
    # Its row was written at the logout: the timer only lets the state go.
    assert SessionHandler().expire(KEY, step.state) == Step(state=None, outputs=[])


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
