"""Customer sessions: opened by a first event, closed by logout or by inactivity."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any, ClassVar

from handlers.base import Event, StateHandler, Step, TimeoutMode, from_us, parse_duration, to_us

__all__ = ["SessionHandler", "SessionState"]


@dataclass(frozen=True)
class SessionState:
    """The open session of a customer."""

    session_start_us: int
    last_event_us: int
    total_events: int


class SessionHandler(StateHandler[SessionState]):
    """One open session per customer; LoggedOut closes it, `session_timeout` of quiet too."""

    key = ("customer_id",)
    columns = ("event_time", "logged_out")
    # At equal times a LoggedOut event goes last, so the other events still count in the session.
    order_by = ("event_time", "logged_out")
    state_type = SessionState
    state_schema = "session_start_us BIGINT, last_event_us BIGINT, total_events BIGINT"
    output_schema = (
        "customer_id STRING, session_start TIMESTAMP, last_event_time TIMESTAMP, "
        "total_events BIGINT, logged_in BOOLEAN, end_reason STRING, session_end TIMESTAMP"
    )
    defaults: ClassVar[dict[str, str]] = {
        "session_timeout": "5 minutes",
        "session_timeout_mode": "event_time",
    }

    @property
    def gap(self) -> timedelta:
        """Inactivity that ends a session."""
        return parse_duration(self.settings["session_timeout"])

    @property
    def timeout_mode(self) -> TimeoutMode:
        mode = self.settings["session_timeout_mode"]
        if mode not in ("event_time", "processing_time"):
            raise ValueError(
                f"session_timeout_mode must be event_time or processing_time, not {mode!r}"
            )
        return mode  # type: ignore[return-value]

    @property
    def timeout(self) -> timedelta:
        return self.gap

    def update(
        self, key: tuple[Any, ...], state: SessionState | None, events: Sequence[Event]
    ) -> Step[SessionState]:
        gap_us = self._gap_us()
        rows: dict[int, dict[str, Any]] = {}
        for event in events:
            t = to_us(event["event_time"])
            if state is not None and t - state.last_event_us > gap_us:
                rows[state.session_start_us] = self._row(key, state, "timeout")
                state = None
            if state is None:
                state = SessionState(session_start_us=t, last_event_us=t, total_events=0)
            # An out-of-order event counts but never moves the start: it is part of the key.
            state = replace(
                state,
                last_event_us=max(state.last_event_us, t),
                total_events=state.total_events + 1,
            )
            if event["logged_out"]:
                rows[state.session_start_us] = self._row(key, state, "logout", end_us=t)
                state = None
        if state is None:
            return Step(state=None, outputs=list(rows.values()))
        rows[state.session_start_us] = self._row(key, state, None)
        return Step(state=state, outputs=list(rows.values()), timer_us=self._deadline(state))

    def expire(self, key: tuple[Any, ...], state: SessionState) -> Step[SessionState]:
        return Step(state=None, outputs=[self._row(key, state, "timeout")])

    def _gap_us(self) -> int:
        return int(self.gap / timedelta(microseconds=1))

    def _deadline(self, state: SessionState) -> int:
        return state.last_event_us + self._gap_us()

    def _row(
        self,
        key: tuple[Any, ...],
        state: SessionState,
        end_reason: str | None,
        end_us: int | None = None,
    ) -> dict[str, Any]:
        if end_reason == "timeout":
            end_us = self._deadline(state)
        return {
            "customer_id": key[0],
            "session_start": from_us(state.session_start_us),
            "last_event_time": from_us(state.last_event_us),
            "total_events": state.total_events,
            "logged_in": end_reason is None,
            "end_reason": end_reason,
            "session_end": None if end_us is None else from_us(end_us),
        }
