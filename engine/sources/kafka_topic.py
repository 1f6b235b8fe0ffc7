"""A Kafka source's options and what the broker says of its topic, without Spark: used by
the streaming source (`engine.sources.kafka`) and by the deployment plan (a replay that
retention would cut short)."""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from engine.definitions.kafka_settings import check_spark_client, librdkafka_settings
from engine.definitions.pipeline import SourceSpec
from engine.errors import KafkaUnavailable, UserError

__all__ = [
    "READ_TIMEOUT_S",
    "KafkaOptions",
    "TopicClient",
    "check_topic",
    "kafka_options",
    "log_starts",
    "split_limit",
]

READ_TIMEOUT_S = 30.0

_N = TypeVar("_N", int, float)


def _number(kind: type[_N], name: str, value: str) -> _N:
    """A numeric source option, or a UserError naming it."""
    try:
        return kind(value)
    except ValueError:
        raise UserError(f"source.{name}: not a number: {value!r}") from None


def kafka_options(spec: SourceSpec, client: Mapping[str, str]) -> dict[str, str]:
    """A kafka source's options with the pipeline's librdkafka settings as `kafka.<name>`."""
    options = {k: str(v) for k, v in spec.options.items() if k != "connector"}
    options.update({f"kafka.{k}": v for k, v in client.items()})
    return options


@dataclass(frozen=True)
class KafkaOptions:
    """The source's options: topic, where a new query starts, batch cap, client settings."""

    topic: str
    starting: str = "earliest"
    max_records: int | None = None
    fail_on_data_loss: bool = True
    timeout_s: float = 15.0
    client: Mapping[str, str] | None = None

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> KafkaOptions:
        """From Spark's string options; bad values are UserErrors naming the option."""
        topic = options.get("topic")
        if not topic:
            raise UserError("source.topic: a kafka source needs a topic")
        given = str(options.get("startingOffsets", "earliest"))
        starting = given.strip().lower()  # in any case, as Spark's connector reads it
        if starting not in ("earliest", "latest"):
            raise UserError(f"source.startingOffsets: earliest or latest, not {given!r}")
        cap = options.get("maxRecordsPerBatch")
        max_records = None if cap in (None, "", "none") else _number(int, "maxRecordsPerBatch", cap)
        if max_records is not None and max_records < 1:
            raise UserError("source.maxRecordsPerBatch: must be at least 1")
        timeout_s = _number(float, "timeout", options.get("timeout", "15"))
        if not 0 < timeout_s < math.inf:
            raise UserError(f"source.timeout: seconds above 0, not {options['timeout']!r}")
        # Spark's connector reads it with Scala's toBoolean (true or false, any case); the
        # Python one took anything but "false" for true: a typo there kept a setting unseen.
        loss = str(options.get("failOnDataLoss", "true"))
        if loss.lower() not in ("true", "false"):
            raise UserError(f"source.failOnDataLoss: true or false, not {loss!r}")
        client = {k.removeprefix("kafka."): v for k, v in options.items() if k.startswith("kafka.")}
        if "bootstrap.servers" not in client:
            raise UserError("kafka.bootstrap.servers: a kafka source needs the broker address")
        return cls(
            topic=topic,
            starting=starting,
            max_records=max_records,
            fail_on_data_loss=loss.lower() == "true",
            timeout_s=timeout_s,
            client=client,
        )

    @property
    def servers(self) -> str:
        """The broker list, for messages."""
        return (self.client or {})["bootstrap.servers"]

    def consumer_conf(self) -> dict[str, Any]:
        """librdkafka settings for a consumer that never joins a group nor commits."""
        return {
            "group.id": f"streamlake-{self.topic}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "socket.connection.setup.timeout.ms": int(self.timeout_s * 1000),
            "log_level": 0,  # failures are raised as KafkaUnavailable, one line
            # A position the broker no longer has is reported, not silently moved.
            "auto.offset.reset": "error",
            **librdkafka_settings(self.client or {}, strict=False),
        }


def split_limit(available: Mapping[int, int], cap: int) -> dict[int, int]:
    """Share a batch cap over partitions in proportion to their backlogs, as Spark's connector
    does, so every partition moves through event time at the same pace.

    An equal share would let a short backlog race ahead and its event times push the
    watermark past the others' rows. Leftovers of the rounding go to the largest remainders
    (then the lowest partition numbers), so the same backlog always gives the same batches.
    """
    total = sum(available.values())
    if total <= cap:
        return dict(available)
    take = {p: cap * n // total for p, n in available.items()}
    by_remainder = sorted(available, key=lambda p: (-(cap * available[p] % total), p))
    for p in by_remainder[: cap - sum(take.values())]:
        take[p] += 1
    return take


def check_topic(options: KafkaOptions, *, by_spark: bool = False) -> list[int]:
    """The topic's partitions: KafkaUnavailable when the broker does not answer within
    `timeout`, UserError when it has no such topic or (`by_spark`, read by Spark's Kafka
    connector) is a broker that connector cannot read."""
    client = TopicClient(options)
    try:
        partitions = client.partitions()
        if by_spark:
            check_spark_client(options.servers, client.cluster_id)
        return partitions
    finally:
        client.stop()


def log_starts(options: KafkaOptions) -> dict[int, int]:
    """The first offset each partition of the topic still holds: 0 until retention deleted
    messages from its start."""
    from confluent_kafka import KafkaException, TopicPartition

    client = TopicClient(options)
    try:
        consumer = client.client()
        starts = {}
        for p in client.partitions():
            tp = TopicPartition(options.topic, p)
            try:
                starts[p] = consumer.get_watermark_offsets(tp, timeout=options.timeout_s)[0]
            except KafkaException as err:
                raise client.unavailable(str(err.args[0])) from None
        return starts
    finally:
        client.stop()


class TopicClient:
    """The driver's view of one topic: its partitions and their ends, asked of the broker
    with a consumer that never joins a group nor commits."""

    def __init__(self, options: KafkaOptions) -> None:
        self.opts = options
        self._consumer: Any = None
        #: The cluster id the broker gave with the topic's partitions (None until asked).
        self.cluster_id: str | None = None

    def client(self) -> Any:
        """The consumer, connected on first use."""
        if self._consumer is None:
            from confluent_kafka import Consumer

            self._consumer = Consumer(self.opts.consumer_conf())
        return self._consumer

    def unavailable(self, why: str) -> KafkaUnavailable:
        """The error for a broker that does not answer, naming it and the topic."""
        return KafkaUnavailable.broker(self.opts.servers, f"topic {self.opts.topic}: {why}")

    def partitions(self, *, seen: bool = False) -> list[int]:
        """The topic's partitions. A topic missing at the start is the user's error; one that
        went missing after it was read (`seen`) is a broker coming back: retried."""
        from confluent_kafka import KafkaException

        try:
            meta = self.client().list_topics(self.opts.topic, timeout=self.opts.timeout_s)
        except KafkaException as err:
            raise self.unavailable(str(err.args[0])) from None
        self.cluster_id = meta.cluster_id
        topic = meta.topics.get(self.opts.topic)
        if topic is None or topic.error is not None or not topic.partitions:
            if seen:
                raise self.unavailable("the topic is gone (broker restarting?)")
            raise UserError(f"source.topic: no topic {self.opts.topic} on {self.opts.servers}")
        return sorted(topic.partitions)

    def ends(self, positions: Mapping[int, int]) -> dict[int, int]:
        """Each partition's high watermark, as seen in a fetch response from `positions`.

        ListOffsets is not used: the tansu broker answers it with the base offset of the last
        record batch, which is short of the end (docs/decisions.md). A fetch returns a record
        or end-of-partition, and with it the true high watermark.
        """
        from confluent_kafka import OFFSET_BEGINNING, KafkaError, TopicPartition

        consumer = self.client()
        topic = self.opts.topic
        consumer.assign([TopicPartition(topic, p, o) for p, o in positions.items()])
        pending, beyond = set(positions), set()
        deadline = time.monotonic() + self.opts.timeout_s
        while pending and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=1000, timeout=0.2):
                err = msg.error()
                if err is None or err.code() == KafkaError._PARTITION_EOF:
                    pending.discard(msg.partition())
                elif err.code() in (KafkaError.OFFSET_OUT_OF_RANGE, KafkaError._AUTO_OFFSET_RESET):
                    pending.discard(msg.partition())
                    beyond.add(msg.partition())  # past the end now: the broker lost data
            for p in list(pending):
                # tansu answers a fetch past the end with no records and no error, only the
                # high watermark. A cached one below our position cannot be stale: positions
                # come from earlier high watermarks.
                high = consumer.get_watermark_offsets(TopicPartition(topic, p), cached=True)[1]
                if 0 <= high < positions[p]:
                    pending.discard(p)
        if pending:
            raise self.unavailable(f"no answer within {self.opts.timeout_s:g} s")
        ends = {
            p: max(0, consumer.get_watermark_offsets(TopicPartition(topic, p), cached=True)[1])
            for p in positions
            if p not in beyond
        }
        if beyond:
            ends.update(self.ends(dict.fromkeys(beyond, OFFSET_BEGINNING)))
        return ends

    def latest(self) -> dict[int, int]:
        """Each partition's end now."""
        from confluent_kafka import OFFSET_BEGINNING

        return self.ends(dict.fromkeys(self.partitions(), OFFSET_BEGINNING))

    def stop(self) -> None:
        """Close the consumer."""
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None
