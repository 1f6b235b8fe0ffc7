"""Customer sessions: opened by a first event, closed by logout or by inactivity."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from functools import cached_property
from typing import Any, ClassVar, NamedTuple

from engine.definitions.handler import Columns, StateHandler, Step, TimeoutMode

__all__ = ["SessionHandler", "SessionRow", "SessionState"]


@dataclass(frozen=True)
class SessionState:
    """The open session of a customer."""

    session_start_us: int
    last_event_us: int
    total_events: int


class SessionRow(NamedTuple):
    """A row of `SessionHandler.output_schema`; times in microseconds since the epoch."""

    customer_id: str
    session_start: int
    last_event_time: int
    total_events: int
    logged_in: bool
    end_reason: str | None
    session_end: int | None


class SessionHandler(StateHandler[SessionState]):
    """One open session per customer; LoggedOut closes it, `session_timeout` of quiet too.
    Reads event items: a line's further items (item_index > 0) are skipped, so it counts once."""

    key = ("customer_id",)
    columns = ("event_time", "logged_out", "item_index")
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
        return self.duration_setting("session_timeout")

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
        self, key: tuple[Any, ...], state: SessionState | None, events: Columns
    ) -> Step[SessionState]:
        gap_us = self._gap_us
        rows: dict[int, SessionRow] = {}
        # The open session as plain locals: this loop runs once per event.
        is_open = state is not None
        start, last, count = (
            (state.session_start_us, state.last_event_us, state.total_events)
            if state
            else (0, 0, 0)
        )
        for t, logged_out, item in zip(
            events["event_time"], events["logged_out"], events["item_index"], strict=True
        ):
            if item:
                continue  # a further item of a Purchase line: the line counted with its item 0
            if is_open and t - last > gap_us:
                rows[start] = self._row(key, SessionState(start, last, count), "timeout")
                is_open = False
            if not is_open:
                start, last, count, is_open = t, t, 0, True
            # An out-of-order event counts but never moves the start: it is part of the key.
            if t > last:
                last = t
            count += 1
            if logged_out:
                rows[start] = self._row(key, SessionState(start, last, count), "logout", end_us=t)
                is_open = False
        if not is_open:
            return Step(state=None, outputs=list(rows.values()))
        new = SessionState(start, last, count)
        rows[start] = self._row(key, new, None)
        return Step(state=new, outputs=list(rows.values()), timer_us=self._deadline(new))

    def expire(self, key: tuple[Any, ...], state: SessionState) -> Step[SessionState]:
        return Step(state=None, outputs=[self._row(key, state, "timeout")])

    @cached_property
    def _gap_us(self) -> int:
        # Parsed once per handler, not once per key.
        return int(self.gap / timedelta(microseconds=1))

    def _deadline(self, state: SessionState) -> int:
        return state.last_event_us + self._gap_us

    def _row(
        self,
        key: tuple[Any, ...],
        state: SessionState,
        end_reason: str | None,
        end_us: int | None = None,
    ) -> SessionRow:
        if end_reason == "timeout":
            end_us = self._deadline(state)
        return SessionRow(
            customer_id=key[0],
            session_start=state.session_start_us,
            last_event_time=state.last_event_us,
            total_events=state.total_events,
            logged_in=end_reason is None,
            end_reason=end_reason,
            session_end=end_us,
        )
