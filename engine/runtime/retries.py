"""What a run does when a query stops with an error: restart it from its checkpoint (a Python
worker that did not start, a Kafka broker away in a continuous run) or raise it as one line;
and the lines that say a query waits on its broker."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from pyspark.sql.streaming import StreamingQuery

from engine.errors import KafkaUnavailable
from engine.plan import Plan
from engine.runtime.broker_wait import BrokerWait
from engine.runtime.errors import WorkerStartFailed, as_user_error
from engine.runtime.events import RunRecorder
from engine.sources.kafka_topic import KafkaOptions, kafka_options
from engine.sources.streams import Connector

__all__ = [
    "RETRY_SECONDS",
    "WORKER_RESTARTS",
    "broker_wait",
    "failure",
    "report_waits",
    "schedule_retries",
]

RETRY_SECONDS = 5.0
# How often in a row a run restarts a query whose Python worker did not start in time.
WORKER_RESTARTS = 3


def failure(
    name: str, query: StreamingQuery, kafka_servers: str, view_files: Mapping[str, Path]
) -> Exception | None:
    """A stopped query's error, as one line (KafkaUnavailable when the broker was away)."""
    err = query.exception()
    if err is None:
        return None
    prefix = f"query {name}: "
    return as_user_error(err, prefix, kafka_servers=kafka_servers, views=view_files)


def schedule_retries(
    queries: Mapping[str, StreamingQuery],
    retry_at: dict[str, float],
    restarts: Counter[str],
    *,
    once: bool,
    kafka_servers: str,
    view_files: Mapping[str, Path],
    out: TextIO,
    recorder: RunRecorder,
) -> None:
    """Raise a stopped query's error, unless it can be run again: a Python worker that did not
    start in time (a few times in a row), or the broker away in a continuous run. Then say so
    and schedule its restart from its checkpoint."""
    for name, q in queries.items():
        if name in restarts and q.isActive and q.lastProgress is not None:
            del restarts[name]  # its workers started: the count is of restarts in a row
        failed = (
            None if q.isActive or name in retry_at else failure(name, q, kafka_servers, view_files)
        )
        if failed is None:
            continue
        if isinstance(failed, WorkerStartFailed) and restarts[name] < WORKER_RESTARTS:
            restarts[name] += 1
            said = f"{failed}; restarting it ({restarts[name]} of {WORKER_RESTARTS})"
        elif isinstance(failed, KafkaUnavailable) and not once:
            said = f"{failed}; retrying every {RETRY_SECONDS:g} s"
        else:
            raise failed
        recorder.error(name, said)
        out.write(said + "\n")
        out.flush()
        retry_at[name] = time.monotonic() + RETRY_SECONDS


def broker_wait(
    plan: Plan, connector: Connector, *, once: bool, input_path: str | None
) -> BrokerWait | None:
    """A watch on Spark's Kafka source in a continuous run, which its client would otherwise
    spend waiting for a broker that went away without a word (the Python source fails)."""
    source = plan.pipeline.source
    if once or input_path or connector != "native" or source.kind != "kafka":
        return None
    options = KafkaOptions.parse(kafka_options(source, plan.pipeline.kafka))
    return BrokerWait(options.servers, options.timeout_s)


def report_waits(
    watch: BrokerWait,
    queries: Mapping[str, StreamingQuery],
    *,
    out: TextIO,
    recorder: RunRecorder,
) -> None:
    """Say which queries started or stopped waiting on the broker."""
    for name, q in queries.items():
        news = watch.observe(name, q.status["message"], time.monotonic()) if q.isActive else None
        if news:
            recorder.error(name, news.line, status=news.status)
            out.write(news.line + "\n")
            out.flush()
