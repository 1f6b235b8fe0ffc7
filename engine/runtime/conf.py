"""The Spark settings a run starts from, known without starting Spark (`run --dry-run` compares
the ones a checkpoint pins with them)."""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["DEFAULT_CONF"]

_JAVA_OPTIONS = (
    "-Duser.timezone=UTC -XX:+UseParallelGC -XX:Tier4InvocationThreshold=50000"
    " -XX:Tier4MinInvocationThreshold=6000 -XX:Tier4CompileThreshold=150000"
    " -XX:Tier4BackEdgeThreshold=400000"
)

# Small, single-machine defaults; every key can be overridden with --conf spark.x=y.
DEFAULT_CONF: Mapping[str, str] = {
    "spark.master": "local[2]",
    "spark.app.name": "streamlake",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.shuffle.partitions": "4",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    # The heap grows to what it may take: 2g holds a 1,000,000-event batch and keeps the whole
    # process tree under 4 GiB (docs/decisions.md, "Memory: a 2 GiB heap and one RocksDB budget").
    "spark.driver.memory": "2g",
    "spark.sql.streaming.stateStore.providerClass": (
        "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
    ),
    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
    # All RocksDB instances of the process share one memory budget (Spark's 500 MB), so more
    # stateful steps or partitions do not each add their own write buffers and cache.
    "spark.sql.streaming.stateStore.rocksdb.boundedMemoryUsage": "true",
    # With this on (Spark's default), late rows are judged against the previous batch's
    # watermark, which a restarted query does not restore the same way: a replayed batch then
    # keeps or drops different rows. Off, every operator uses the batch's own watermark, read
    # from the offset log, so a replay is exact (docs/decisions.md).
    "spark.sql.streaming.statefulOperator.allowMultiple": "false",
    "spark.scheduler.mode": "FAIR",
    # The throughput collector: G1's concurrent threads compete with the tasks for two cores
    # (measured: whole runs 7% faster, peak memory 0.3 GiB lower; docs/decisions.md, "The JVM
    # collects garbage for throughput"). The JIT's second compiler takes a method at ten times
    # the JVM's counts: it spent 65 s of CPU on a 1,000,000-event run and 37 s on 8 lines
    # (measured: whole 1M runs 7% faster; docs/decisions.md, "The JIT's second compiler waits
    # for hotter code").
    "spark.driver.extraJavaOptions": _JAVA_OPTIONS,
    "spark.executor.extraJavaOptions": _JAVA_OPTIONS,
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # Delta rebuilds a table's snapshot from its log with 50 partitions by default: on small
    # lakes that is 50 tasks of nothing per commit (measured: a MERGE 3.5 s instead of 9 s).
    "spark.databricks.delta.snapshotPartitions": "1",
    # Spark keeps 100 compiled code classes by default; one server_logs batch uses about 150
    # (parse, state, the five tables' writes and MERGEs), so each batch compiled them all again:
    # about 1 s a batch (docs/decisions.md, "Spark keeps 1,000 compiled classes").
    "spark.sql.codegen.cache.maxEntries": "1000",
}
