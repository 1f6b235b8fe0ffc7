"""A TCP server of orders, one JSON object per line, for the socket source of seed 003.

One sequence of orders, served to one client at a time: while no client is connected nothing is
sent and the sequence waits; an order that could not be written goes to the next client. A
client that closes within FIRST_ORDER_DELAY_S of connecting (a check that the server is up)
gets nothing.
"""

from __future__ import annotations

import json
import math
import random
import select
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import count as _count
from types import TracebackType

from engine.errors import UserError

__all__ = ["STATUSES", "OrderServer", "SentSummary", "orders"]

STATUSES = ("PLACED", "INPROGRESS", "COMPLETED", "CANCELLED")
WEIGHTS = (40, 30, 20, 10)
_POLL_S = 0.2  # how often waits look at the stop event
# A new client gets its first order this long after it connected: a client that only checks
# the server is there (`run` does, before it starts) has closed by then and takes no order.
FIRST_ORDER_DELAY_S = 0.2


def orders(seed: int = 0) -> Iterator[dict[str, str]]:
    """The endless, deterministic order sequence: ids `o-00000001`, ...; statuses 40/30/20/10 %."""
    rng = random.Random(seed)
    for seq in _count(1):
        yield {"order_id": f"o-{seq:08d}", "status": rng.choices(STATUSES, WEIGHTS)[0]}


@dataclass
class SentSummary:
    """Orders sent per status; sent = the kernel accepted every byte of the line."""

    by_status: dict[str, int] = field(default_factory=lambda: dict.fromkeys(STATUSES, 0))

    @property
    def total(self) -> int:
        """All orders sent."""
        return sum(self.by_status.values())

    def __str__(self) -> str:
        counts = ", ".join(f"{s} {n}" for s, n in self.by_status.items())
        return f"sent {self.total} orders ({counts})"


def _peer_closed(conn: socket.socket) -> bool:
    """True if the client closed its side or reset; anything it sent is read and dropped."""
    try:
        while select.select([conn], [], [], 0)[0]:
            if not conn.recv(4096):
                return True
    except BlockingIOError:
        return False
    except OSError:
        return True
    return False


def _write(conn: socket.socket, data: bytes, stop: threading.Event) -> bool:
    """Write all of `data` (like `sendall`); False if stopped first. OSError if the client left."""
    view = memoryview(data)
    while view:
        try:
            view = view[conn.send(view) :]
        except BlockingIOError:
            if stop.is_set():
                return False
            select.select([], [conn], [], _POLL_S)
    return True


def _close(conn: socket.socket) -> None:
    """Close so that the client reads everything sent, then EOF."""
    try:
        conn.shutdown(socket.SHUT_WR)
        _peer_closed(conn)  # unread input would turn the close into a reset
    except OSError:
        pass
    conn.close()


class OrderServer:
    """Serves `orders(seed)` on host:port to one client at a time, `rate` per second (0: no limit),
    `count` in total (None: until stopped)."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 9998,
        *,
        rate: float = 10.0,
        count: int | None = None,
        seed: int = 0,
    ) -> None:
        if not 0 <= rate < math.inf:  # NaN fails this too
            raise UserError(
                f"--rate: orders per second, 0 (no limit) or a finite number above; not {rate:g}"
            )
        if count is not None and count < 0:
            raise UserError(f"--count: must be 0 or more, not {count}")
        self.host, self.port = host, port
        self.rate, self.count, self.seed = rate, count, seed
        self._listener: socket.socket | None = None

    def describe(self) -> str:
        """One line for the console: address, rate and count."""
        rate = f"{self.rate:g}/s" if self.rate else "unlimited"
        count = "unlimited" if self.count is None else str(self.count)
        return f"serving orders on {self.host}:{self.port} (rate {rate}, count {count})"

    def listen(self) -> OrderServer:
        """Bind and listen (port 0: a free one, then in `self.port`); UserError if it can't."""
        if self._listener is None:
            listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                listener.bind((self.host, self.port))
                listener.listen(5)
            except OSError as err:
                listener.close()
                reason = err.strerror or str(err)
                raise UserError(
                    f"--port: cannot listen on {self.host}:{self.port} ({reason})"
                ) from None
            listener.settimeout(_POLL_S)
            self.port = listener.getsockname()[1]
            self._listener = listener
        return self

    def close(self) -> None:
        """Stop listening."""
        if self._listener is not None:
            self._listener.close()
            self._listener = None

    def __enter__(self) -> OrderServer:
        return self.listen()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _accept(self, stop: threading.Event) -> socket.socket | None:
        assert self._listener is not None
        while not stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            conn.setblocking(False)
            return conn
        return None

    def _pace(self, due: float, stop: threading.Event) -> None:
        while not stop.is_set() and (left := due - time.monotonic()) > 0:
            stop.wait(min(left, _POLL_S))

    def serve(self, stop: threading.Event) -> SentSummary:
        """Send orders until `count` were sent or `stop` is set; the client then sees EOF."""
        self.listen()
        summary = SentSummary()
        sequence = orders(self.seed)
        pending: dict[str, str] | None = None
        interval = 1 / self.rate if self.rate else 0.0
        while not stop.is_set() and (self.count is None or summary.total < self.count):
            conn = self._accept(stop)
            if conn is None:
                break
            due = time.monotonic() + FIRST_ORDER_DELAY_S
            try:
                while self.count is None or summary.total < self.count:
                    self._pace(due, stop)
                    if stop.is_set() or _peer_closed(conn):
                        break
                    pending = pending or next(sequence)
                    line = json.dumps(pending).encode() + b"\n"
                    if not _write(conn, line, stop):
                        break
                    summary.by_status[pending["status"]] += 1
                    pending = None
                    due = max(due + interval, time.monotonic() - interval)
            except OSError:
                pass  # the client left: `pending` goes to the next one
            finally:
                _close(conn)
        return summary
