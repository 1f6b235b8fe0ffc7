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
    """A customer's open session, or the last one a logout closed (`ended_us`, its time), held
    until the watermark passes that logout."""

    session_start_us: int
    last_event_us: int
    total_events: int
    ended_us: int | None = None


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
    state_schema = (
        "session_start_us BIGINT, last_event_us BIGINT, total_events BIGINT, ended_us BIGINT"
    )
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
        # The session as plain locals: this loop runs once per event.
        start, last, count, ended = (
            (state.session_start_us, state.last_event_us, state.total_events, state.ended_us)
            if state
            else (0, 0, 0, None)
        )
        is_open = state is not None and ended is None
        for t, logged_out, item in zip(
            events["event_time"], events["logged_out"], events["item_index"], strict=True
        ):
            if item:
                continue  # a further item of a Purchase line: the line counted with its item 0
            if ended is not None:
                if t <= ended:
                    # Not after the logout that closed the session: a line of that session (at
                    # equal times a LoggedOut line goes last), even one in a later batch. As a
                    # session of its own it would have the same key and replace the closed one.
                    count += 1
                    rows[start] = self._row(key, SessionState(start, last, count, ended))
                    continue
                ended = None
            if is_open and t - last > gap_us:
                rows[start] = self._row(key, SessionState(start, last, count), timed_out=True)
                is_open = False
            if not is_open:
                start, last, count, is_open = t, t, 0, True
            # An out-of-order event counts but never moves the start: it is part of the key.
            if t > last:
                last = t
            count += 1
            if logged_out:
                ended, is_open = t, False
                rows[start] = self._row(key, SessionState(start, last, count, ended))
        if ended is not None:
            # Held until the watermark passes the logout; then `expire` lets it go.
            held = SessionState(start, last, count, ended)
            return Step(state=held, outputs=list(rows.values()), timer_us=ended)
        if not is_open:
            return Step(state=None, outputs=list(rows.values()))
        new = SessionState(start, last, count)
        rows[start] = self._row(key, new)
        return Step(state=new, outputs=list(rows.values()), timer_us=self._deadline(new))

    def expire(self, key: tuple[Any, ...], state: SessionState) -> Step[SessionState]:
        if state.ended_us is not None:
            return Step(state=None, outputs=[])  # its row was written at the logout
        return Step(state=None, outputs=[self._row(key, state, timed_out=True)])

    @cached_property
    def _gap_us(self) -> int:
        # Parsed once per handler, not once per key.
        return int(self.gap / timedelta(microseconds=1))

    def _deadline(self, state: SessionState) -> int:
        return state.last_event_us + self._gap_us

    def _row(
        self, key: tuple[Any, ...], state: SessionState, *, timed_out: bool = False
    ) -> SessionRow:
        """The session's row: open, closed by its logout (`ended_us`) or timed out."""
        if timed_out:
            end_reason, end_us = "timeout", self._deadline(state)
        elif state.ended_us is not None:
            end_reason, end_us = "logout", state.ended_us
        else:
            end_reason, end_us = None, None
        return SessionRow(
            customer_id=key[0],
            session_start=state.session_start_us,
            last_event_time=state.last_event_us,
            total_events=state.total_events,
            logged_in=end_reason is None,
            end_reason=end_reason,
            session_end=end_us,
        )
