"""The Spark session: local by default, any master URL or a Spark Connect server by
configuration."""

from __future__ import annotations

import functools
import logging
import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

from pyspark.errors import PySparkException
from pyspark.logger import PySparkLogger
from pyspark.sql import SparkSession

from engine.errors import UserError, first_line
from engine.runtime.cluster import (
    await_executors,
    check_reachable,
    check_settings,
    executor_conf,
    ship_project,
)
from engine.runtime.conf import DEFAULT_CONF
from engine.runtime.connect import REMOTE, check_remote, connect_session
from engine.runtime.errors import without_sqlstate
from engine.runtime.jars import DELTA_CATALOG, find_packages
from engine.runtime.scratch import scratch_folder

__all__ = ["check_spark", "default_writer", "get_spark", "has_delta"]


@contextmanager
def _stderr_to(log_file: Path | None) -> Iterator[None]:
    # The JVM and the Python workers it spawns inherit file descriptor 2 at launch: pointing it
    # at a log file while Spark starts keeps their logs out of the user's terminal for good.
    if log_file is None:
        yield
        return
    log_file.parent.mkdir(parents=True, exist_ok=True)
    saved = os.dup(2)
    target = os.open(log_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.dup2(target, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(target)


@functools.cache
def _scratch_warehouse() -> str:
    # Every table lives in the lake by path and no command uses the catalog's tables, yet Spark
    # makes a folder for its default database when it starts. Left to Spark, that is an empty
    # `spark-warehouse/` in whatever folder the command was started from, a read-only `query`
    # included; here it is a temporary folder, removed when the process ends.
    return str(scratch_folder("streamlake-warehouse-"))


def check_spark(conf: Mapping[str, str]) -> None:
    """Fail in one line when the Spark that `conf` names has a URL of no known form or does not
    answer (a master, a Connect server): what `get_spark` checks, for a run to say it before
    it writes anything, its lock included."""
    remote = conf.get(REMOTE)
    if remote is not None:
        check_remote(remote)
        return
    settings = {**DEFAULT_CONF, **conf}
    check_settings(settings)
    check_reachable(settings)


def get_spark(
    conf: Mapping[str, str] | None = None, *, log_file: Path | None = None
) -> SparkSession:
    """Get or create the session; `conf` adds to and overrides DEFAULT_CONF.

    With `log_file`, Spark's own output (JVM and Python workers) goes there, not to stderr.
    """
    # Python workers must run this interpreter so they import the project and its packages.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    # pyspark's own pandas calls warn on every batch in the workers; the warnings are not ours.
    os.environ.setdefault("PYTHONWARNINGS", "ignore::FutureWarning")
    remote = (conf or {}).get(REMOTE)
    if remote is not None:  # the server has its own packages, master and memory
        spark = connect_session(remote, DEFAULT_CONF, conf or {})
        _check_sql_conf(spark)
        return spark
    check_spark(conf or {})  # an unreachable master: one line now, not a minute of retries
    # The Spark packages fetched by `make` (engine/runtime/jars.py).
    settings = {**DEFAULT_CONF, **find_packages().spark_conf(), **(conf or {})}
    settings.setdefault("spark.sql.warehouse.dir", _scratch_warehouse())
    settings.update(executor_conf(settings))
    builder = SparkSession.builder
    for key, value in settings.items():
        builder = builder.config(key, value)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    with _stderr_to(log_file):
        spark = builder.getOrCreate()
    _check_sql_conf(spark)
    _leave_sigterm_to_python(spark)
    ship_project(spark, settings)
    await_executors(spark, settings)
    if log_file is not None:
        # pyspark logs each SQL error as a JSON record on stderr before raising it; the CLI
        # prints the error itself, in one line.
        for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
            PySparkLogger.getLogger(name).setLevel(logging.CRITICAL)
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _leave_sigterm_to_python(spark: SparkSession) -> None:
    # A scheduler or `timeout` sends SIGTERM to the whole process group, the driver's JVM too,
    # whose shutdown hook then stopped Spark under the run that was stopping its queries
    # cleanly ("Cannot call methods on a stopped SparkContext", exit 1). The JVM ignores it,
    # as pyspark has it ignore SIGINT: this process stops Spark, and the JVM still ends with
    # it (pyspark's gateway exits when its parent does).
    jvm = spark._jvm
    if jvm is not None:
        jvm.sun.misc.Signal.handle(jvm.sun.misc.Signal("TERM"), jvm.sun.misc.SignalHandler.SIG_IGN)


def _check_sql_conf(spark: SparkSession) -> None:
    """Spark checks the SQL settings' values (`spark.sql.shuffle.partitions=abc`) only when the
    session first reads one, somewhere in the run: read one now, so a bad value is a usage
    error naming the setting before anything runs."""
    try:
        spark.conf.get("spark.sql.session.timeZone")
    except PySparkException as err:
        if not (err.getCondition() or "").startswith("INVALID_CONF_VALUE"):
            raise
        params = err.getMessageParameters() or {}
        reason = without_sqlstate(first_line(err))
        raise UserError(
            f"--conf {params.get('confName')}={params.get('confValue')}: {reason}"
        ) from None


def has_delta(spark: SparkSession) -> bool:
    """Whether the session reads and writes Delta itself (delta-spark is loaded)."""
    return spark.conf.get("spark.sql.catalog.spark_catalog", "") == DELTA_CATALOG


def default_writer(spark: SparkSession) -> Literal["spark", "delta-rs"]:
    """Spark writes the tables where it has Delta; delta-rs otherwise (the embedded path)."""
    return "spark" if has_delta(spark) else "delta-rs"
