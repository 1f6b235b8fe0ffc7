"""Kafka topics as sinks: a view's `key` and `value` columns sent with the idempotent producer:
confluent-kafka's from the driver (`TopicSink`), or Spark's Kafka sink from the executors
(`SparkTopicSink`, where the session has Spark's Kafka connector)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal

import pyarrow as pa
from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from engine.definitions.kafka_settings import check_spark_client, librdkafka_settings
from engine.definitions.tables import Column
from engine.errors import KafkaUnavailable, UserError
from engine.reachable import endpoints, refusals
from engine.sinks import BatchId
from engine.sinks.kafka_producer import KafkaDeliveryError, KafkaProducer

__all__ = [
    "SparkTopicSink",
    "TopicSink",
    "check_broker",
    "check_listening",
    "headers_column",
    "java_client",
]

_MESSAGE = (
    Column("key", pa.string(), True, "Message key (NULL: none)", "STRING"),
    Column("value", pa.string(), False, "Message value", "STRING"),
)


class TopicSink:
    """One topic. A batch is sent whole or fails: any delivery error raises, so the batch is
    retried from the checkpoint (at-least-once; see docs/decisions.md)."""

    takes: Literal["arrow", "dataframe"] = "arrow"
    #: Before the tables: alerts leave as soon as the batch is computed.
    order = 0
    quarantine = False
    unique_key: tuple[str, ...] = ()
    merge_key: tuple[str, ...] = ()
    #: A topic keeps no batch ids, so it cannot tell a replayed batch (engine.sinks.writer).
    transactional = False
    columns = _MESSAGE

    def __init__(self, topic: str, client: Mapping[str, str], *, where: Path) -> None:
        self.topic = topic
        self.client = dict(client)
        self.name = f"kafka:{topic}"
        self.where = where
        self._producer: KafkaProducer | None = None

    def holds(self, batch: BatchId) -> bool:
        """A topic cannot tell: never."""
        return False

    def claim(self, *, pipeline: str, query: str, checkpoint: Path) -> None:
        """Topics are not claimed (several writers may send to one), but each start of the
        query gets a new producer: a broker that came back empty does not know the old one's
        id and times its messages out (message.timeout.ms, 30 s by default)."""
        self._producer = None

    @property
    def servers(self) -> str:
        """The broker list, for messages."""
        return self.client.get("bootstrap.servers", "?")

    def _connect(self) -> KafkaProducer:
        if self._producer is None:
            self._producer = KafkaProducer(
                {
                    "enable.idempotence": True,
                    "acks": "all",
                    "linger.ms": 5,
                    "message.timeout.ms": 30000,
                    "log_level": 0,  # failures are raised, one line
                    **self.client,
                }
            )
        return self._producer

    def write(self, data: pa.Table, batch: BatchId, *, keys: pa.Table | None = None) -> int:
        """Send every row and wait for all acknowledgements; returns messages sent."""
        if data.num_rows == 0:
            return 0
        producer = self._connect()
        headers = [
            ("pipeline", batch.pipeline.encode()),
            ("query", batch.query.encode()),
            ("batch_id", str(batch.batch).encode()),
        ]
        keys, values = data.column("key").to_pylist(), data.column("value").to_pylist()
        try:
            for key, value in zip(keys, values, strict=True):
                producer.send(self.topic, value, key, headers=headers)
            producer.flush(float(self.client.get("message.timeout.ms", 30000)) / 1000 + 5)
        except KafkaDeliveryError as err:
            self._producer = None  # an idempotent producer cannot go on after a failure
            raise KafkaUnavailable.broker(self.servers, str(err)) from None
        return data.num_rows


def check_listening(client: Mapping[str, str]) -> None:
    """Fail in one line (KafkaUnavailable) when no bootstrap server of `client` accepts a TCP
    connection, rather than after librdkafka's 15 s of asking."""
    servers = client.get("bootstrap.servers", "")
    reasons = refusals(endpoints(servers, default_port=9092))
    if reasons:
        raise KafkaUnavailable.broker(servers, "; ".join(reasons))


def check_broker(
    client: Mapping[str, str],
    topics: Sequence[str],
    *,
    where: Path,
    by_spark: bool = False,
    timeout_s: float = 15.0,
) -> None:
    """The broker of `client` (librdkafka settings) answers within `timeout_s` (else
    KafkaUnavailable), has or creates each of `topics` (else a UserError naming `where`) and,
    written by Spark's Kafka sink (`by_spark`), is a broker it can write to."""
    from confluent_kafka import KafkaError, KafkaException

    servers = client.get("bootstrap.servers", "?")
    metadata = KafkaProducer({**librdkafka_settings(client, strict=False), "log_level": 0}).client
    for topic in topics:
        try:
            meta = metadata.list_topics(topic, timeout=timeout_s)
        except KafkaException as err:
            raise KafkaUnavailable.broker(servers, err.args[0].str()) from None
        if by_spark:
            check_spark_client(servers, meta.cluster_id)
        found = meta.topics.get(topic)
        # A broker that creates topics on first use answers LEADER_NOT_AVAILABLE meanwhile.
        if found is None or (
            found.error is not None and found.error.code() != KafkaError.LEADER_NOT_AVAILABLE
        ):
            raise UserError(
                f"{where}: topic {topic}: not on {servers}, which does not create topics on "
                "first use; create it (`runner.py broker` creates the pipelines' topics)"
            )


def headers_column(headers: Mapping[str, str | None]) -> SparkColumn:
    """Kafka message headers for Spark's Kafka sink (array<struct<key, value binary>>); a header
    whose value is None is left out."""
    return F.array(
        *[
            F.struct(F.lit(k).alias("key"), F.lit(v).cast("binary").alias("value"))
            for k, v in headers.items()
            if v is not None
        ]
    )


def java_client(client: Mapping[str, str]) -> dict[str, str]:
    """The pipeline's Kafka settings as Spark's Kafka options (`kafka.<setting>`)."""
    return {f"kafka.{k}": v for k, v in client.items()}


class SparkTopicSink(TopicSink):
    """One topic written by Spark's Kafka sink: the batch's rows stay on the executors. The
    same contract as TopicSink: a batch is sent whole (idempotent producer, acks=all) or the
    write fails and Spark replays it."""

    takes = "dataframe"

    def write(  # type: ignore[override]
        self, data: DataFrame, batch: BatchId, *, keys: pa.Table | None = None
    ) -> int:
        """Send the batch's rows with the headers pipeline, query and batch_id."""
        headers = {"pipeline": batch.pipeline, "query": batch.query, "batch_id": str(batch.batch)}
        (
            data.select("key", "value", headers_column(headers).alias("headers"))
            .write.format("kafka")
            .options(**java_client(self.client))
            .option("topic", self.topic)
            .save()
        )
        return -1
