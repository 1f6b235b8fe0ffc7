"""Whether a server answers on TCP, asked before Spark starts: a Spark master, a Kafka broker.

Spark's and librdkafka's own clients retry an address that refuses for a minute or more; one
connection attempt per address, closed at once, says in a second that nothing listens."""

from __future__ import annotations

import socket
from collections.abc import Sequence

__all__ = ["CONNECT_TIMEOUT_S", "endpoints", "refusals"]

CONNECT_TIMEOUT_S = 5.0


def endpoints(hosts: str, *, default_port: int | None = None) -> list[tuple[str, int]]:
    """The (host, port) pairs of a comma-separated list such as `h1:9092,[::1]:9093` (a
    `scheme://` before each is dropped); an entry without a port takes `default_port`, else
    is left out."""
    found = []
    for entry in hosts.split(","):
        entry = entry.strip().split("://")[-1].split("/")[0]
        host, colon, port = entry.rpartition(":")
        if not colon or "]" in port:  # no port, or an IPv6 address without one
            host, port = entry, str(default_port or "")
        if host and port.isdigit():
            found.append((host.strip("[]"), int(port)))
    return found


def refusals(
    addresses: Sequence[tuple[str, int]], *, timeout_s: float = CONNECT_TIMEOUT_S
) -> list[str]:
    """Why each address refused a TCP connection (`host:port reason`), or no reasons as soon
    as one accepts."""
    reasons = []
    for host, port in addresses:
        try:
            with socket.create_connection((host, port), timeout=timeout_s):
                return []
        except OSError as err:
            reasons.append(f"{host}:{port} {err.strerror or err}")
    return reasons
