"""Tests for the order server of seed 003: real TCP sockets on 127.0.0.1, no Spark."""

from __future__ import annotations

import json
import math
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from itertools import islice
from pathlib import Path

import pytest

from devtools.broker import free_port
from devtools.order_server import STATUSES, OrderServer, SentSummary, orders
from engine.errors import UserError

PROJECT = Path(__file__).resolve().parents[2]
TIMEOUT_S = 10.0


class Running:
    """A server serving in a thread; `summary` once `serve` returned."""

    def __init__(self, server: OrderServer) -> None:
        self.server = server.listen()
        self.stop = threading.Event()
        self.summary: SentSummary | None = None
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        self.summary = self.server.serve(self.stop)

    def join(self) -> SentSummary:
        self.thread.join(TIMEOUT_S)
        assert not self.thread.is_alive(), "the server did not finish"
        assert self.summary is not None
        return self.summary


@contextmanager
def serving(**options: float | int | None) -> Iterator[Running]:
    with OrderServer("127.0.0.1", 0, **options) as server:  # type: ignore[arg-type]
        running = Running(server)
        try:
            yield running
        finally:
            running.stop.set()
            running.thread.join(TIMEOUT_S)


def connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S)
    sock.settimeout(TIMEOUT_S)
    return sock


def read_lines(sock: socket.socket, *, at_least: int | None = None) -> list[str]:
    """Lines until EOF, or until at least `at_least` whole lines arrived."""
    data = b""
    while at_least is None or data.count(b"\n") < at_least or not data.endswith(b"\n"):
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    assert not data or data.endswith(b"\n"), "a line was cut"
    return data.decode("utf-8").splitlines()


def parse(lines: list[str]) -> list[dict[str, str]]:
    records = [json.loads(line) for line in lines]
    for r in records:
        assert set(r) == {"order_id", "status"}
        assert r["status"] in STATUSES
    return records


def ids(n: int, start: int = 1) -> list[str]:
    return [f"o-{i:08d}" for i in range(start, start + n)]


def test_orders_are_deterministic_and_weighted() -> None:
    first = list(islice(orders(7), 2000))
    assert first == list(islice(orders(7), 2000))
    assert first != list(islice(orders(8), 2000))
    assert [o["order_id"] for o in first] == ids(2000)
    share = Counter(o["status"] for o in first)
    assert share["PLACED"] > share["INPROGRESS"] > share["COMPLETED"] > share["CANCELLED"] > 0


def test_count_sends_exactly_that_many_then_eof() -> None:
    with serving(rate=0, count=25, seed=3) as running:
        with connect(running.server.port) as client:
            records = parse(read_lines(client))
        summary = running.join()
    assert [r["order_id"] for r in records] == ids(25)
    assert summary.total == 25
    assert summary.by_status == {s: Counter(r["status"] for r in records)[s] for s in STATUSES}
    assert str(summary).startswith("sent 25 orders (PLACED ")


def test_rate_limits_the_stream() -> None:
    with serving(rate=20, count=10) as running:
        with connect(running.server.port) as client:
            started = time.monotonic()
            lines = read_lines(client)
            took = time.monotonic() - started
        assert running.join().total == 10
    assert len(lines) == 10
    assert took >= 0.4


def test_a_client_that_leaves_politely_and_the_next_get_the_sequence_once() -> None:
    with serving(rate=100, count=30) as running:
        with connect(running.server.port) as first:
            head = read_lines(first, at_least=3)
            first.shutdown(socket.SHUT_WR)  # the server stops sending, closes: read the rest
            head += read_lines(first)
        with connect(running.server.port) as second:
            tail = read_lines(second)
        summary = running.join()
    assert 3 <= len(head) < 30 and tail
    got = [r["order_id"] for r in parse(head + tail)]
    assert got == ids(30)
    assert summary.total == 30


def test_a_client_that_closes_mid_stream_loses_nothing_at_a_slow_rate() -> None:
    # At 10/s the server sees the close long before its next order is due.
    with serving(rate=10, count=6) as running:
        with connect(running.server.port) as first:
            head = read_lines(first, at_least=2)
        with connect(running.server.port) as second:
            tail = read_lines(second)
        summary = running.join()
    got = [r["order_id"] for r in parse(head + tail)]
    assert got == ids(6)
    assert summary.total == 6


def test_no_client_means_nothing_sent_and_stop_ends_it() -> None:
    with serving(rate=0) as running:
        time.sleep(0.3)
        running.stop.set()
        summary = running.join()
    assert summary.total == 0
    assert str(summary) == "sent 0 orders (PLACED 0, INPROGRESS 0, COMPLETED 0, CANCELLED 0)"


@pytest.mark.parametrize(
    ("options", "option"),
    [
        ({"rate": -1.0}, "--rate"),
        ({"rate": math.nan}, "--rate"),
        ({"rate": math.inf}, "--rate"),
        ({"count": -5}, "--count"),
    ],
)
def test_negative_or_endless_options_are_user_errors(
    options: dict[str, float], option: str
) -> None:
    with pytest.raises(UserError, match=f"^{option}: "):
        OrderServer("127.0.0.1", 0, **options)  # type: ignore[arg-type]


def test_a_port_in_use_is_a_user_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(UserError, match=f"^--port: cannot listen on 127.0.0.1:{port} \\("):
            OrderServer("127.0.0.1", port).listen()


def start_cli(*args: str) -> tuple[subprocess.Popen[str], int]:
    """`runner.py serve-orders` on a free port, once it printed that it listens."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "runner.py", "serve-orders", "--port", str(port), *args],
        cwd=PROJECT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    first = proc.stdout.readline()
    assert first.startswith(f"serving orders on 127.0.0.1:{port} ("), first + proc.stderr.read()
    return proc, port


def test_cli_sends_count_orders_then_exits() -> None:
    proc, port = start_cli("--count", "5", "--rate", "0")
    with connect(port) as client:
        lines = read_lines(client)
    out, err = proc.communicate(timeout=TIMEOUT_S)
    assert proc.returncode == 0, err
    assert len(lines) == 5
    counts = Counter(r["status"] for r in parse(lines))
    summary = ", ".join(f"{s} {counts[s]}" for s in STATUSES)
    assert out.splitlines()[-1] == f"sent 5 orders ({summary})"


def test_cli_sigint_on_an_idle_server_exits_0() -> None:
    proc, _ = start_cli()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=TIMEOUT_S)
    assert proc.returncode == 0, err
    assert out.splitlines()[-1] == (
        "sent 0 orders (PLACED 0, INPROGRESS 0, COMPLETED 0, CANCELLED 0)"
    )


def test_cli_port_in_use_exits_2() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        run = subprocess.run(
            [sys.executable, "runner.py", "serve-orders", "--port", str(port)],
            cwd=PROJECT,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S * 3,
        )
    assert run.returncode == 2
    assert run.stdout == ""
    assert len(run.stderr.splitlines()) == 1
    assert run.stderr.startswith(f"error: --port: cannot listen on 127.0.0.1:{port} (")
