"""The socket source's reader against the real order server (TCP on 127.0.0.1), without Spark:
offsets that go on from a checkpoint's, and the check that a server is there."""

from __future__ import annotations

import json
import pickle
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

import pytest

from devtools.broker import free_port
from engine.errors import UserError
from engine.sources.socket_lines import _line_count, _LineReader, check_server, server_address
from tests.unit.test_order_server import Running, connect, read_lines, serving

TIMEOUT_S = 10.0


def read_until(reader: _LineReader, start: dict | int, lines: int) -> tuple[list[tuple], dict]:
    """Batches from `start` until `lines` lines were read: the rows and the last end offset."""
    rows: list[tuple] = []
    deadline = time.monotonic() + TIMEOUT_S
    while len(rows) < lines:
        assert time.monotonic() < deadline, f"only {len(rows)} of {lines} lines came"
        batch, end = reader.read(start)
        got = list(batch)
        assert end == {"lines": _line_count(start) + len(got)}
        rows, start = rows + got, end
        time.sleep(0.05)
    return rows, start


def read_until_served(reader: _LineReader, start: dict, running: Running) -> tuple[list, dict]:
    """Batches from `start` until the server has sent its last line and closed."""
    rows: list[tuple] = []
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        assert time.monotonic() < deadline, f"the server did not finish ({len(rows)} lines)"
        done = not running.thread.is_alive()  # before the read: nothing comes after it
        batch, end = reader.read(start)
        got = list(batch)
        assert end == {"lines": _line_count(start) + len(got)}
        rows, start = rows + got, end
        if done:
            time.sleep(0.2)  # the reading thread's last recv
            batch, start = reader.read(start)
            return rows + list(batch), start
        time.sleep(0.05)


def test_offsets_go_on_from_the_checkpoint_over_a_new_connection() -> None:
    # Paced, so that the first connection leaves before the last order: lines it received
    # after its last batch are lost with it (a socket cannot send them again), the rest come
    # over the second.
    with serving(rate=20, count=12, seed=4) as running:
        first = _LineReader("127.0.0.1", running.server.port)
        assert first.initialOffset() == {"lines": 0}
        head, end = read_until(first, first.initialOffset(), 5)
        first.stop()
        # A restart: a new reader, a new connection, the checkpoint's offset as the start.
        second = _LineReader("127.0.0.1", running.server.port)
        tail, last = read_until_served(second, end, running)
        second.stop()
        sent = running.join()
    assert sent.total == 12 and tail
    assert last == {"lines": len(head) + len(tail)}  # counted on from the first connection's
    ids = [json.loads(value)["order_id"] for value, _ in head + tail]
    lost = 12 - len(ids)
    assert lost <= 2, f"{lost} lines lost between the connections"
    assert ids == [f"o-{i:08d}" for i in [*range(1, len(head) + 1), *range(13 - len(tail), 13)]]
    assert all(isinstance(at, datetime) and at.tzinfo is UTC for _, at in head + tail)


def test_a_replayed_batch_is_empty_and_the_reader_pickles_unconnected() -> None:
    # Spark pickles the reader for its executors, which replay a batch planned before a crash.
    with serving(rate=0, count=3) as running:
        reader = _LineReader("127.0.0.1", running.server.port)
        read_until(reader, {"lines": 0}, 3)
        copy = pickle.loads(pickle.dumps(_LineReader("127.0.0.1", running.server.port)))
        assert list(copy.readBetweenOffsets({"lines": 0}, {"lines": 3})) == []
        reader.stop()
        assert running.join().total == 3


def test_the_check_takes_no_order_from_the_server() -> None:
    with serving(rate=0, count=4) as running:
        check_server("127.0.0.1", running.server.port)
        with connect(running.server.port) as client:
            lines = read_lines(client)
        assert running.join().total == 4
    assert json.loads(lines[0])["order_id"] == "o-00000001"  # the check took none


def test_no_server_is_one_line_naming_the_options() -> None:
    port = free_port()
    with pytest.raises(UserError, match=rf"^source\.host/source\.port: .* 127\.0\.0\.1:{port} "):
        check_server("127.0.0.1", port)
    with pytest.raises(UserError, match=r"source\.host/source\.port"):
        _LineReader("127.0.0.1", port).read({"lines": 0})


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "source.port: a socket source needs the server's port"),
        ({"port": "x9"}, "source.port: a TCP port from 1 to 65535, not 'x9'"),
        ({"port": 70000}, "source.port: a TCP port from 1 to 65535, not '70000'"),
    ],
)
def test_bad_port_options(options: dict, message: str) -> None:
    with pytest.raises(UserError, match=message):
        server_address(options)


@contextmanager
def connected() -> Iterator[tuple[_LineReader, socket.socket]]:
    """A reader connected to a server of the test's own, and the connection it accepted."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        reader = _LineReader("127.0.0.1", listener.getsockname()[1])
        reader.read({"lines": 0})  # connects
        conn, _ = listener.accept()
        try:
            yield reader, conn
        finally:
            conn.close()
            reader.stop()


def test_a_last_line_without_newline_and_crlf() -> None:
    with connected() as (reader, conn):
        conn.sendall(b'{"a": 1}\r\n\xff\n{"b"')
        conn.close()
        rows, end = read_until(reader, {"lines": 0}, 3)
    assert [value for value, _ in rows] == ['{"a": 1}', "\ufffd", '{"b"']
    assert end == {"lines": 3}


def test_a_checkpoint_of_sparks_socket_source_goes_on() -> None:
    # Spark's socket source kept the index of its last line, from -1, as a bare number.
    with serving(rate=0, count=2) as running:
        reader = _LineReader("127.0.0.1", running.server.port)
        _, end = read_until(reader, 49, 2)
        reader.stop()
        assert running.join().total == 2
    assert end == {"lines": 52}


def test_a_line_sent_in_many_pieces_and_lines_split_across_reads() -> None:
    line = b'{"order_id": "' + b"x" * 3_000_000 + b'"}'
    with connected() as (reader, conn):
        conn.sendall(b"a\nb")
        time.sleep(0.1)  # a line's end in the next read
        conn.sendall(b"c\n\n" + line + b"\nd\n")
        rows, end = read_until(reader, {"lines": 0}, 5)
    assert [value.encode() for value, _ in rows] == [b"a", b"bc", b"", line, b"d"]
    assert end == {"lines": 5}


def test_a_server_that_closes_and_comes_back_is_read_on() -> None:
    """A continuous run outlives a restart of its server: it connects again and counts on
    (the connection used to stay half-closed, and the run read nothing more, silently)."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        reader = _LineReader("127.0.0.1", port)
        reader.read({"lines": 0})  # connects
        conn, _ = listener.accept()
        with conn:
            conn.sendall(b"a\nb\n")
        head, end = read_until(reader, {"lines": 0}, 2)
    with socket.create_server(("127.0.0.1", port)) as listener:
        listener.settimeout(TIMEOUT_S)
        # The reader connects again within a second of its next read.
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            assert time.monotonic() < deadline, "the reader did not connect again"
            batch, end = reader.read(end)
            assert list(batch) == []
            try:
                listener.settimeout(0.2)
                conn, _ = listener.accept()
                break
            except TimeoutError:
                continue
        with conn:
            conn.sendall(b"c\n")
            tail, last = read_until(reader, end, 1)
            reader.stop()
    assert [v for v, _ in head + tail] == ["a", "b", "c"]
    assert last == {"lines": 3}
