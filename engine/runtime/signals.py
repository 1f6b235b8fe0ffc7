"""Ctrl-C and SIGTERM as a stop request, for the long-running commands (run, broker, servers)."""

from __future__ import annotations

import signal
import threading

__all__ = ["stop_on_signals"]


def stop_on_signals() -> threading.Event:
    """An event set by SIGINT/SIGTERM; commands stop cleanly when it is set."""
    event = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: event.set())
    return event
