"""The window-sample rules as tables of readings and expected samples (no Spark)."""

from __future__ import annotations

import pytest

from handlers.window_sample import WindowSampleHandler, WindowState, sample

# 2023-04-12 10:00:00 UTC in microseconds since the epoch.
T0_US = 1_681_293_600_000_000


def at(second: int) -> int:
    return T0_US + second * 1_000_000


def r(second: int, freq: float = 1.0, device: str = "d1") -> tuple[int, str, float, bool]:
    """A reading at T0 + second; negative frequencies are anomalies, as in the SQL."""
    return (at(second), device, freq, freq < 0)


@pytest.mark.parametrize(
    ("readings", "expected"),
    [
        ([], []),
        # One normal reading is first, middle and last at once: emitted once.
        ([r(5)], [r(5)]),
        # Two: middle is index 1, the last one.
        ([r(9), r(5)], [r(5), r(9)]),
        # Five, unordered: first, index 2, last.
        ([r(40), r(5), r(25), r(10), r(35)], [r(5), r(25), r(40)]),
        # Anomalies are all kept and do not count for first/middle/last.
        ([r(5), r(20, -5), r(10), r(25)], [r(5), r(10), r(20, -5), r(25)]),
        ([r(1, -1), r(2, -2)], [r(1, -1), r(2, -2)]),
        # Same time on two devices: ties broken by device, so the result is stable.
        ([r(5, 2, "b"), r(5, 1, "a"), r(6, 3, "a")], [r(5, 1, "a"), r(5, 2, "b"), r(6, 3, "a")]),
    ],
)
def test_sample_picks_first_middle_last_and_every_anomaly(readings, expected):
    assert sample(readings) == expected


def event(second: int, freq: float, start: int = 0, device: str = "d1") -> dict:
    return {
        "window_start": at(start),
        "window_end": at(start + 60),
        "device_id": device,
        "sensor_freq": freq,
        "event_time": at(second),
        "is_anomalous": freq < 0,
    }


def columns(*events: dict) -> dict[str, list]:
    """The handler's input: its columns, one list each."""
    return {name: [e[name] for e in events] for name in WindowSampleHandler.columns}


def test_update_keeps_readings_until_the_timer_at_the_window_end():
    handler = WindowSampleHandler()
    first = handler.update(("w",), None, columns(event(5, 1.0), event(20, -5.0)))
    assert first.outputs == () and len(first.state.readings) == 2
    # The timer fires once the watermark passes it: 1 ms before the end closes the window
    # when the watermark reaches the end.
    assert first.timer_us == first.state.window_end_us - 1000
    second = handler.update(("w",), first.state, columns(event(30, 2.0)))
    assert len(second.state.readings) == 3
    closed = handler.expire(("w",), second.state)
    assert closed.state is None
    assert [(row.sensor_freq, row.is_anomalous) for row in closed.outputs] == [
        (1.0, False),
        (-5.0, True),
        (2.0, False),
    ]
    assert {row.window_end for row in closed.outputs} == {at(60)}
    assert tuple(closed.outputs[0]) == (at(0), at(60), "d1", 1.0, at(5), False)


def test_a_group_key_without_the_window_is_refused():
    with pytest.raises(ValueError, match="must include the window"):
        WindowSampleHandler().update(
            ("all",), None, columns(event(5, 1.0), event(35, 1.0, start=30))
        )


def test_state_survives_the_round_trip_through_a_spark_row():
    handler = WindowSampleHandler()
    state = WindowState(1, 2, (r(5), r(6, -1.5, "x")))
    assert handler.state_from_row(handler.state_to_row(state)) == state
