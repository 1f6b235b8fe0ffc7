"""Kafka as a Spark streaming source, through the Python Data Source API and confluent-kafka.

Spark's own Kafka connector is a Maven jar that cannot be fetched here. This source keeps the
same contract: a batch is a range of offsets per partition, recorded in the query's
checkpoint (offset log) before it is read, so a replay after a crash reads the same records.
Columns: key, value (bytes, as Kafka holds them), topic, partition, offset, timestamp;
engine/sources casts key and value to STRING as for Spark's own connector, which keeps the
bytes: the parse SQL tells a value that is not valid UTF-8 and quarantines it losslessly.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from engine.errors import KafkaUnavailable, UserError

__all__ = ["SCHEMA", "KafkaOptions", "KafkaSource", "check_topic", "log_starts", "split_limit"]

SCHEMA = "key BINARY, value BINARY, topic STRING, partition INT, offset BIGINT, timestamp TIMESTAMP"
_ARROW = pa.schema(
    [
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", pa.timestamp("us", tz=str(UTC))),
    ]
)
READ_TIMEOUT_S = 30.0


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
        starting = options.get("startingOffsets", "earliest")
        if starting not in ("earliest", "latest"):
            raise UserError(f"source.startingOffsets: earliest or latest, not {starting!r}")
        try:
            cap = options.get("maxRecordsPerBatch")
            max_records = int(cap) if cap not in (None, "", "none") else None
            timeout_s = float(options.get("timeout", 15))
        except ValueError as err:
            raise UserError(f"source option: not a number ({err})") from None
        if max_records is not None and max_records < 1:
            raise UserError("source.maxRecordsPerBatch: must be at least 1")
        client = {k.removeprefix("kafka."): v for k, v in options.items() if k.startswith("kafka.")}
        if "bootstrap.servers" not in client:
            raise UserError("kafka.bootstrap.servers: a kafka source needs the broker address")
        return cls(
            topic=topic,
            starting=starting,
            max_records=max_records,
            fail_on_data_loss=str(options.get("failOnDataLoss", "true")).lower() != "false",
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
            **(self.client or {}),
        }


def split_limit(available: Mapping[int, int], cap: int) -> dict[int, int]:
    """Share a batch cap over partitions: records to take from each, fair and deterministic.

    Each round gives every partition with records left an equal share; leftovers go to the
    lowest partition numbers, so the same backlog always gives the same batches.
    """
    take = dict.fromkeys(available, 0)
    left = cap
    while left > 0:
        open_parts = sorted(p for p in available if take[p] < available[p])
        if not open_parts:
            break
        share = max(1, left // len(open_parts))
        for p in open_parts:
            n = min(share, available[p] - take[p], left)
            take[p] += n
            left -= n
            if left == 0:
                break
    return take


def check_topic(options: KafkaOptions) -> list[int]:
    """The topic's partitions: KafkaUnavailable when the broker does not answer within
    `timeout`, UserError when it has no such topic."""
    reader = _Reader(options)
    try:
        return reader._partitions()
    finally:
        reader.stop()


def log_starts(options: KafkaOptions) -> dict[int, int]:
    """The first offset each partition of the topic still holds: 0 until retention deleted
    messages from its start."""
    from confluent_kafka import KafkaException, TopicPartition

    reader = _Reader(options)
    try:
        consumer = reader._client()
        starts = {}
        for p in reader._partitions():
            tp = TopicPartition(options.topic, p)
            try:
                starts[p] = consumer.get_watermark_offsets(tp, timeout=options.timeout_s)[0]
            except KafkaException as err:
                raise reader._unavailable(str(err.args[0])) from None
        return starts
    finally:
        reader.stop()


class _Range(InputPartition):
    def __init__(self, partition: int, start: int, end: int) -> None:
        super().__init__((partition, start, end))
        self.partition, self.start, self.end = partition, start, end


def _offsets(offset: Mapping[str, int]) -> dict[int, int]:
    # Spark stores offsets as JSON, whose keys are strings.
    return {int(p): int(o) for p, o in offset.items()}


class _Reader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: KafkaOptions) -> None:
        self.opts = options
        self._consumer: Any = None
        self._target: dict[int, int] | None = None  # AvailableNow: stop here

    # -- driver side: offsets -------------------------------------------------------------
    def _client(self) -> Any:
        if self._consumer is None:
            from confluent_kafka import Consumer

            self._consumer = Consumer(self.opts.consumer_conf())
        return self._consumer

    def _unavailable(self, why: str) -> KafkaUnavailable:
        return KafkaUnavailable(
            f"kafka broker {self.opts.servers} unreachable (kafka.bootstrap.servers), "
            f"topic {self.opts.topic}: {why}"
        )

    def _partitions(self, *, seen: bool = False) -> list[int]:
        """The topic's partitions. A topic missing at the start is the user's error; one that
        went missing after it was read (`seen`) is a broker coming back: retried."""
        from confluent_kafka import KafkaException

        try:
            meta = self._client().list_topics(self.opts.topic, timeout=self.opts.timeout_s)
        except KafkaException as err:
            raise self._unavailable(str(err.args[0])) from None
        topic = meta.topics.get(self.opts.topic)
        if topic is None or topic.error is not None or not topic.partitions:
            if seen:
                raise self._unavailable("the topic is gone (broker restarting?)")
            raise UserError(f"source.topic: no topic {self.opts.topic} on {self.opts.servers}")
        return sorted(topic.partitions)

    def _ends(self, positions: Mapping[int, int]) -> dict[int, int]:
        """Each partition's high watermark, as seen in a fetch response from `positions`.

        ListOffsets is not used: the tansu broker answers it with the base offset of the last
        record batch, which is short of the end (docs/decisions.md). A fetch returns a record
        or end-of-partition, and with it the true high watermark.
        """
        from confluent_kafka import OFFSET_BEGINNING, KafkaError, TopicPartition

        consumer = self._client()
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
            raise self._unavailable(f"no answer within {self.opts.timeout_s:g} s")
        ends = {
            p: max(0, consumer.get_watermark_offsets(TopicPartition(topic, p), cached=True)[1])
            for p in positions
            if p not in beyond
        }
        if beyond:
            ends.update(self._ends(dict.fromkeys(beyond, OFFSET_BEGINNING)))
        return ends

    def _latest(self) -> dict[int, int]:
        from confluent_kafka import OFFSET_BEGINNING

        return self._ends(dict.fromkeys(self._partitions(), OFFSET_BEGINNING))

    def initialOffset(self) -> dict:
        if self.opts.starting == "earliest":
            return {str(p): 0 for p in self._partitions()}
        return {str(p): o for p, o in self._latest().items()}

    def getDefaultReadLimit(self) -> ReadLimit:
        cap = self.opts.max_records
        return ReadMaxRows(cap) if cap else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        # --once reads what is there now, and no more.
        self._target = self._latest()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = _offsets(start)
        for p in self._partitions(seen=bool(begin)):
            begin.setdefault(p, 0)  # a partition added since the last batch
        ends = self._ends(begin)
        if self._target is not None:
            ends = {p: min(o, self._target.get(p, o)) for p, o in ends.items()}
        lost = {p for p in ends if ends[p] < begin[p]}
        for p in sorted(lost):
            _lost(self.opts, p, begin[p])
        available = {p: max(0, ends[p] - begin[p]) for p in ends}
        capped = isinstance(limit, ReadMaxRows)
        take = split_limit(available, limit.max_rows) if capped else available
        end = {p: begin[p] + take[p] for p in ends}
        for p in lost:  # failOnDataLoss=false: go on from where the broker is now
            end[p] = ends[p]
        return {str(p): o for p, o in sorted(end.items())}

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        begin, stop = _offsets(start), _offsets(end)
        ranges = []
        for p, o in sorted(stop.items()):
            first = begin.get(p, 0)
            if o < first:  # data lost on the broker: what it has now, from its start
                first = 0
            if o > first:
                ranges.append(_Range(p, first, o))
        return ranges

    def commit(self, end: dict) -> None:
        pass  # offsets live in Spark's checkpoint; nothing is committed to the broker

    def stop(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    # -- executor side: records -----------------------------------------------------------
    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, _Range)
        yield from read_range(self.opts, partition.partition, partition.start, partition.end)


def read_range(
    opts: KafkaOptions, partition: int, start: int, end: int, *, chunk: int = 5000
) -> Iterator[pa.RecordBatch]:
    """Records [start, end) of one partition as Arrow batches; KafkaUnavailable on a timeout."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer(opts.consumer_conf())
    try:
        tp = TopicPartition(opts.topic, partition)
        # The partition has ended short of where this batch reads: its records are gone.
        gone = (
            KafkaError._PARTITION_EOF,
            KafkaError.OFFSET_OUT_OF_RANGE,
            KafkaError._AUTO_OFFSET_RESET,
        )
        consumer.assign([TopicPartition(opts.topic, partition, start)])
        position = start
        # Records the broker announced are there; a busy machine can be slow to hand over the
        # first ones, so readers wait longer than the driver's reachability check.
        patience = max(opts.timeout_s, READ_TIMEOUT_S)
        deadline = time.monotonic() + patience
        while position < end:
            msgs = consumer.consume(num_messages=min(chunk, end - position), timeout=0.5)
            rows = []
            for m in msgs:
                err = m.error()
                if err is not None and err.code() in gone:
                    _lost(opts, partition, max(position, m.offset()))
                    end = -1  # read what is there, then stop
                    break
                if err is not None:
                    raise KafkaUnavailable(
                        f"kafka topic {opts.topic} partition {partition}: {err.str()}"
                    )
                if m.offset() >= end:
                    break
                rows.append(m)
            if rows:
                position = rows[-1].offset() + 1
                deadline = time.monotonic() + patience
                yield _batch(rows)
            elif 0 <= consumer.get_watermark_offsets(tp, cached=True)[1] < position:
                _lost(opts, partition, position)  # the broker ends before our position
                break
            elif time.monotonic() > deadline:
                raise KafkaUnavailable(
                    f"kafka broker {opts.servers} unreachable (kafka.bootstrap.servers): "
                    f"topic {opts.topic} partition {partition} stuck at offset {position} "
                    f"of {end} for {patience:g} s"
                )
            if end < 0 or (msgs and msgs[-1].error() is None and msgs[-1].offset() >= end - 1):
                break
    finally:
        consumer.close()


def _lost(opts: KafkaOptions, partition: int, missing: int) -> None:
    """A partition ends before an offset already planned or read: the broker lost records
    (topic recreated, or retention). Going on is the user's decision."""
    if opts.fail_on_data_loss:
        raise UserError(
            f"kafka topic {opts.topic} partition {partition} has no offset {missing} any more: "
            "the broker lost data; set source.failOnDataLoss=false to go on"
        )


def _batch(msgs: list[Any]) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays(
        [
            pa.array([m.key() for m in msgs], pa.binary()),
            pa.array([m.value() for m in msgs], pa.binary()),
            pa.array([m.topic() for m in msgs], pa.string()),
            pa.array([m.partition() for m in msgs], pa.int32()),
            pa.array([m.offset() for m in msgs], pa.int64()),
            pa.array([m.timestamp()[1] * 1000 for m in msgs], _ARROW.field("timestamp").type),
        ],
        schema=_ARROW,
    )


class KafkaSource(DataSource):
    """`spark.readStream.format("streamlake_kafka")`: options topic, startingOffsets
    (earliest|latest), maxRecordsPerBatch, failOnDataLoss, timeout (s), kafka.<librdkafka>."""

    @classmethod
    def name(cls) -> str:
        return "streamlake_kafka"

    def schema(self) -> str:
        return SCHEMA

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return _Reader(KafkaOptions.parse(self.options))
