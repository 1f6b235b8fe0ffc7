"""The Spark session: local by default, any master or Spark Connect URL by configuration."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from pyspark.sql import SparkSession

__all__ = ["DEFAULT_CONF", "get_spark"]

# Small, single-machine defaults; every key can be overridden with --conf spark.x=y.
DEFAULT_CONF: Mapping[str, str] = {
    "spark.master": "local[2]",
    "spark.app.name": "streamlake",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.shuffle.partitions": "4",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.memory": "4g",
    "spark.sql.streaming.stateStore.providerClass": (
        "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
    ),
    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
    "spark.scheduler.mode": "FAIR",
    "spark.driver.extraJavaOptions": "-Duser.timezone=UTC",
    "spark.executor.extraJavaOptions": "-Duser.timezone=UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
}


def get_spark(conf: Mapping[str, str] | None = None) -> SparkSession:
    """Get or create the session; `conf` adds to and overrides DEFAULT_CONF."""
    # Python workers must run this interpreter so they import the project and its packages.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    # pyspark's own pandas calls warn on every batch in the workers; the warnings are not ours.
    os.environ.setdefault("PYTHONWARNINGS", "ignore::FutureWarning")
    settings = {**DEFAULT_CONF, **(conf or {})}
    builder = SparkSession.builder
    remote = settings.pop("spark.remote", None)
    if remote:
        builder = builder.remote(remote)
        settings.pop("spark.master", None)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
