"""Why a local broker exited at start, read from what it printed (no broker, no Spark)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from devtools.broker import _exit_reason, _in_use

BIND = (
    "[2026-11-25 17:02:11,102] ERROR [KafkaServer id=1] Fatal error during startup."
    " (kafka.server.KafkaRaftServer)\n"
    "org.apache.kafka.common.KafkaException: Socket server failed to bind to"
    " 127.0.0.1:9092: Address already in use.\n"
    "\tat kafka.network.Acceptor.openServerSocket(SocketServer.scala:734)\n"
    "Caused by: java.net.BindException: Address already in use\n"
)


@pytest.mark.parametrize(
    ("output", "reason"),
    [
        (
            BIND,
            "org.apache.kafka.common.KafkaException: Socket server failed to bind to"
            " 127.0.0.1:9092: Address already in use.",
        ),
        (
            "starting\n[x] ERROR disk full (kafka.log.LogManager)\nbye\n",
            "[x] ERROR disk full (kafka.log.LogManager)",
        ),
        ("starting\n  out of luck  \n\n", "out of luck"),
        ("", "it printed nothing"),
    ],
)
def test_exit_reason_is_the_first_exception_else_error_else_last_line(
    tmp_path: Path, output: str, reason: str
) -> None:
    log = tmp_path / "broker.out"
    # What a caller's log held before this start is not this start's reason.
    log.write_text("Exception: from an earlier run\n")
    start = log.stat().st_size
    with log.open("a") as f:
        f.write(output)
    assert _exit_reason(log, start) == reason


def test_a_listening_port_is_in_use_and_a_closed_one_is_not() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert _in_use(port)
    assert not _in_use(port)
