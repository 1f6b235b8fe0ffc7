"""A TCP socket of text lines as a Spark streaming source, through the Python Data Source API.

Spark's own socket source numbers the lines of each connection from the start again, so a
query restarted from its checkpoint fails ("Offsets committed out of order"), and the
checkpoint holds the query's state (order_status's running totals and open windows). This
source numbers lines by a count that only grows: a batch is the range of line numbers it read,
and a new connection goes on from the checkpoint's last offset.

A `SimpleDataSourceStreamReader`: it runs on the driver, in the Python process Spark keeps for
the query's source, where a thread reads the socket and stamps each line with the time it
arrived; each micro-batch takes the lines that arrived since the last. The lines are kept in
that process only, so a batch the checkpoint planned but did not commit (a crash, a stop that
cut a batch) cannot be read again after a restart: it is replayed empty. The server serves one
client at a time, so one query reads the socket (order_status has one).

Columns: value (the line, decoded as UTF-8 with replacement characters, as Spark's socket
source does), timestamp (its arrival).
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from pyspark.sql.datasource import DataSource, SimpleDataSourceStreamReader
from pyspark.sql.types import StructType

from engine.errors import UserError
from engine.reachable import CONNECT_TIMEOUT_S

__all__ = ["SCHEMA", "SocketSource", "check_server", "server_address"]

SCHEMA = "value STRING, timestamp TIMESTAMP"

#: The offset key: lines read by the query since its checkpoint began.
_LINES = "lines"
#: Seconds between attempts to connect again after the server closed the connection.
_RECONNECT_S = 1.0


def server_address(options: dict[str, Any]) -> tuple[str, int]:
    """host and port of the source's options; a UserError naming the option if unusable."""
    host = str(options.get("host") or "127.0.0.1")
    port = str(options.get("port") or "")
    if not port:
        raise UserError("source.port: a socket source needs the server's port")
    if not port.isdigit() or not 1 <= int(port) <= 65535:
        raise UserError(f"source.port: a TCP port from 1 to 65535, not {port!r}")
    return host, int(port)


def _connect(host: str, port: int, timeout_s: float) -> socket.socket:
    """A connection to the server, or a UserError naming source.host and source.port."""
    try:
        return socket.create_connection((host, port), timeout=timeout_s)
    except OSError as err:
        raise UserError(
            f"source.host/source.port: no server accepts connections on {host}:{port} "
            f"({err.strerror or err}); start it first (e.g. runner.py serve-orders --port {port})"
        ) from None


def check_server(host: str, port: int, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """Fail in one line, before any query starts, when nothing accepts on host:port.

    The connection is closed at once, before the server has had a reason to write: a server
    that writes the instant it accepts could lose a line to it (serve-orders waits first)."""
    conn = _connect(host, port, timeout_s)
    conn.close()


class _Receiver:
    """One connection to the server and the lines it delivered that no batch has taken yet."""

    def __init__(self, host: str, port: int) -> None:
        self.conn = _connect(host, port, CONNECT_TIMEOUT_S)
        self.conn.settimeout(None)  # the reading thread blocks until lines come
        self.lines: list[tuple[str, datetime]] = []
        self.lock = threading.Lock()
        self.ended = threading.Event()  # set after the last line: the server closed
        # A daemon: the process Spark runs the source in ends when the query stops.
        threading.Thread(target=self._receive, daemon=True).start()

    def take(self) -> list[tuple[str, datetime]]:
        """The lines that arrived since the last call."""
        with self.lock:
            taken, self.lines = self.lines, []
        return taken

    def close(self) -> None:
        """Close the connection, so the server serves its next client."""
        with contextlib.suppress(OSError):  # the server may have closed first
            self.conn.shutdown(socket.SHUT_RDWR)
        self.conn.close()

    def _receive(self) -> None:
        """Append each complete line with its arrival time until the server closes."""
        # The start of a line still coming, in chunks: joined once its newline comes, so a
        # long line costs its length, not its length squared (a 48 MB line took 52 s).
        pending: list[bytes] = []
        while True:
            try:
                data = self.conn.recv(65536)
            except OSError:
                data = b""  # closed by close(), or reset by the server: no more lines
            arrived = datetime.now(UTC)
            if not data:
                # Like Spark's socket source (readLine), a last line without newline counts.
                lines = [b"".join(pending)] if pending else []
            elif b"\n" not in data:
                pending.append(data)
                continue
            else:
                first, *lines = data.split(b"\n")
                lines.insert(0, b"".join([*pending, first]))
                tail = lines.pop()  # after the last newline: the start of the next line
                pending = [tail] if tail else []
            with self.lock:
                self.lines.extend((_text(line), arrived) for line in lines)
            if not data:
                self.ended.set()
                return


class _LineReader(SimpleDataSourceStreamReader):
    """Reads the socket on the driver; offsets are `{"lines": N}`, N lines read in all."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        # Spark pickles the reader to build the executors' read function, so the connection
        # (a socket, a lock, a thread) is made by the first read, on the driver; that also
        # keeps the reader Spark builds on an executor to replay a batch from connecting.
        self._receiver: _Receiver | None = None
        self._next_connect = 0.0  # monotonic time of the next attempt after the server closed

    def initialOffset(self) -> dict:
        return {_LINES: 0}

    def read(self, start: dict) -> tuple[Iterator[tuple], dict]:
        receiver = self._receiver
        if receiver is None:
            receiver = self._receiver = _Receiver(self.host, self.port)
        ended = receiver.ended.is_set()  # before the take: then every line of it is taken
        taken = receiver.take()
        if ended and time.monotonic() >= self._next_connect:
            # The server closed the connection (it restarted, or sent all it had): read its
            # next one, as a restarted query would; what it sends meanwhile is lost. A server
            # that is not back yet is asked again a second later, not at every poll.
            self._next_connect = time.monotonic() + _RECONNECT_S
            with contextlib.suppress(UserError):
                self._receiver = _Receiver(self.host, self.port)
                receiver.close()
        # The count goes on from the checkpoint's offset, whatever the connection.
        return iter(taken), {_LINES: _line_count(start) + len(taken)}

    def readBetweenOffsets(self, start: dict, end: dict) -> Iterator[tuple]:
        # Only called to replay, after a restart, a batch that was planned and not committed:
        # its lines lived in the memory of the process that read them. A socket cannot send
        # them again, so the batch is replayed empty (documented: a crash loses them).
        return iter(())

    def commit(self, end: dict) -> None:
        pass  # nothing to acknowledge: the server does not know what was processed

    def stop(self) -> None:
        """Close the connection, so the server serves its next client."""
        receiver, self._receiver = self._receiver, None
        if receiver is not None:
            receiver.close()


def _line_count(offset: dict | int) -> int:
    """Lines read before `offset`. A checkpoint written by Spark's socket source (up to
    2026-11-26) holds a bare number, its last line's index from -1 in the connection then;
    the count goes on after it, so such a checkpoint and its state are kept."""
    if isinstance(offset, int):
        return offset + 1
    return int(offset[_LINES])


def _text(line: bytes) -> str:
    # Spark's socket source reads lines with a UTF-8 reader: \r\n ends a line too, and bytes
    # that are not UTF-8 become replacement characters.
    return line.removesuffix(b"\r").decode("utf-8", "replace")


class SocketSource(DataSource):
    """`spark.readStream.format("streamlake_socket")`: options host (default 127.0.0.1), port."""

    @classmethod
    def name(cls) -> str:
        return "streamlake_socket"

    def schema(self) -> str:
        return SCHEMA

    def simpleStreamReader(self, schema: StructType) -> SimpleDataSourceStreamReader:
        return _LineReader(*server_address(self.options))
