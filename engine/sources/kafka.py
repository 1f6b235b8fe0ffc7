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
from engine.sources.kafka_topic import READ_TIMEOUT_S, KafkaOptions, TopicClient, split_limit

__all__ = ["SCHEMA", "KafkaSource"]

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
        self.topic = TopicClient(options)
        self._target: dict[int, int] | None = None  # AvailableNow: stop here

    def initialOffset(self) -> dict:
        if self.opts.starting == "earliest":
            return {str(p): 0 for p in self.topic.partitions()}
        return {str(p): o for p, o in self.topic.latest().items()}

    def getDefaultReadLimit(self) -> ReadLimit:
        cap = self.opts.max_records
        return ReadMaxRows(cap) if cap else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        # --once reads what is there now, and no more.
        self._target = self.topic.latest()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = _offsets(start)
        for p in self.topic.partitions(seen=bool(begin)):
            begin.setdefault(p, 0)  # a partition added since the last batch
        ends = self.topic.ends(begin)
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
        self.topic.stop()

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
                raise KafkaUnavailable.broker(
                    opts.servers,
                    f"topic {opts.topic} partition {partition} stuck at offset {position} "
                    f"of {end} for {patience:g} s",
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
