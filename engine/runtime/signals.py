"""Ctrl-C and SIGTERM as a stop request, for the long-running commands (run, broker, servers)."""

from __future__ import annotations

import signal
import threading

__all__ = ["StopRequest", "stop_on_signals"]


class StopRequest(threading.Event):
    """Set by SIGINT or SIGTERM; `signum` says which, for the exit status of a cut-short run."""

    signum: int | None = None


def stop_on_signals() -> StopRequest:
    """An event set by SIGINT/SIGTERM; commands stop cleanly when it is set."""
    event = StopRequest()

    def request(signum: int, _frame: object) -> None:
        event.signum = signum
        event.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, request)
    return event
