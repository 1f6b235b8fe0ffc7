"""Running on a Spark cluster: check the master answers, ship the project's code to executors.

A local master runs executors on this machine, in this interpreter's environment. A cluster
(standalone `spark://`, YARN, Kubernetes) does not: its Python
workers must be told which interpreter to run, and they need the project's packages (`engine`,
`handlers`: the state handlers are pickled by reference) whatever their working directory.
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
import time
import zipfile
from collections.abc import Mapping
from pathlib import Path

from pyspark.sql import SparkSession

from engine.errors import UserError
from engine.project import PROJECT
from engine.reachable import endpoints, refusals
from engine.runtime.scratch import scratch_folder

__all__ = [
    "PACKAGES",
    "await_executors",
    "check_reachable",
    "check_settings",
    "executor_conf",
    "project_zip",
    "ship_project",
]

#: The project's Python packages that code running on executors imports.
PACKAGES = ("engine", "handlers")
#: Spark's own setting for how long to wait for executors to register; a run waits
#: EXECUTOR_WAIT_S for its first one when it is not set (Spark's 30 s default is for scheduling).
EXECUTOR_WAIT = "spark.scheduler.maxRegisteredResourcesWaitingTime"
EXECUTOR_WAIT_S = 60.0
# Spark's time strings (JavaUtils.timeStringAs): whole numbers, milliseconds without a unit.
_SPARK_TIME = re.compile(r"\s*(\d+)(us|ms|s|m|min|h|d)?\s*", re.IGNORECASE)
_SECONDS = {"us": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "min": 60, "h": 3600, "d": 86400}


# The master URLs Spark takes (SparkContext.createTaskScheduler and its cluster managers). Any
# other fails inside the JVM as "An error occurred while calling ...JavaSparkContext", or (an
# empty one) kills the launcher before Spark says anything.
_MASTER = re.compile(
    r"local(\[([1-9]\d*|\*)(\s*,\s*\d+)?\])?"
    r"|local-cluster\[\s*\d+\s*,\s*\d+\s*,\s*\d+\s*\]"
    r"|spark://[^/]+|yarn|k8s://\S+"
)
# spark.driver.memory goes to the driver's JVM as -Xmx<value>: the JVM takes only this form,
# and on anything else exits before Spark can name the setting.
_JVM_SIZE = re.compile(r"\d+[kKmMgGtT]?")


def check_settings(settings: Mapping[str, str]) -> None:
    """Fail in one line, before Spark starts, on settings Spark cannot start with and cannot
    name: a master URL of no known form, a driver heap size the JVM refuses."""
    master = settings.get("spark.master", "")
    if not _MASTER.fullmatch(master):
        raise UserError(
            f"--conf spark.master={master}: expected local, local[N], spark://HOST:PORT, "
            "yarn or k8s://URL"
        )
    memory = settings.get("spark.driver.memory")
    if memory is not None and not _JVM_SIZE.fullmatch(memory):
        raise UserError(f"--conf spark.driver.memory={memory}: expected a size such as 2g or 512m")
    executor_wait_s(settings)


def executor_wait_s(settings: Mapping[str, str]) -> float:
    """How long a run on a standalone master waits for its first executor, in seconds."""
    value = settings.get(EXECUTOR_WAIT)
    if value is None:
        return EXECUTOR_WAIT_S
    found = _SPARK_TIME.fullmatch(value)
    if not found:
        raise UserError(f"--conf {EXECUTOR_WAIT}={value}: expected a time such as 60s or 2min")
    return int(found[1]) * _SECONDS[(found[2] or "ms").lower()]


def _is_local(master: str) -> bool:
    return master.startswith("local")


def check_reachable(settings: Mapping[str, str]) -> None:
    """Fail in one line, before Spark starts, when no standalone master answers: Spark itself
    retries for about a minute and then leaves a stopped session."""
    url = settings["spark.master"]
    if not url.startswith("spark://"):
        return  # local, yarn, k8s: Spark reports those itself, quickly
    addresses = endpoints(url.removeprefix("spark://").split("/")[0])
    if not addresses:
        raise UserError(f"--conf spark.master={url}: expected spark://HOST:PORT")
    reasons = refusals(addresses)
    if reasons:
        raise UserError(f"--conf spark.master={url}: unreachable ({'; '.join(reasons)})")


def executor_conf(settings: Mapping[str, str]) -> dict[str, str]:
    """Settings that make a cluster's executors run this interpreter (unless set already)."""
    if _is_local(settings.get("spark.master", "")):
        return {}  # local executors inherit this environment
    python = os.environ.get("PYSPARK_PYTHON", sys.executable)
    conf = {"spark.executorEnv.PYSPARK_PYTHON": python, "spark.pyspark.python": python}
    return {k: v for k, v in conf.items() if k not in settings}


def project_zip(folder: Path) -> Path:
    """A zip of the project's packages (sources only) in `folder`, for executors' sys.path;
    named after its contents, which alone make its bytes."""
    files = [
        (path.relative_to(PROJECT.root).as_posix(), path.read_bytes())
        for package in PACKAGES
        for path in sorted((PROJECT.root / package).rglob("*.py"))
    ]
    digest = hashlib.sha256()
    for name, data in files:
        digest.update(name.encode() + b"\0" + data + b"\0")
    # Spark keeps files it was sent under their names, for the life of its executors: on a
    # long-lived Spark Connect server, a changed project under the same name is refused.
    target = folder / f"streamlake_project_{digest.hexdigest()[:16]}.zip"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in files:
            entry = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            archive.writestr(entry, data, compress_type=zipfile.ZIP_DEFLATED)
    return target


def ship_project(spark: SparkSession, settings: Mapping[str, str]) -> None:
    """Add the project's packages to the executors' Python path when they run elsewhere."""
    if _is_local(settings.get("spark.master", "")):
        return  # local executors import the project as the driver does
    # Spark serves the file from this path for the whole run.
    spark.sparkContext.addPyFile(str(project_zip(scratch_folder("streamlake-pyfiles-"))))


def await_executors(spark: SparkSession, settings: Mapping[str, str]) -> None:
    """Fail in one line when a standalone master gives the run no executor: with no worker
    registered, or none with free cores, Spark waits for ever and the run prints nothing (its
    "Initial job has not accepted any resources" is a warning, below the log level)."""
    master = settings.get("spark.master", "")
    if not master.startswith("spark://"):
        return
    wait_s = executor_wait_s(settings)
    deadline = time.monotonic() + wait_s
    # The driver counts as one executor of the status.
    while spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() < 2:
        if time.monotonic() > deadline:
            raise UserError(
                f"--conf spark.master={master}: no executor started within {wait_s:g} s "
                f"({EXECUTOR_WAIT}); the master has no worker with free cores and memory "
                "(start one, README 'Running on a Spark cluster')"
            )
        time.sleep(0.5)
