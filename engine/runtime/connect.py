"""Spark Connect: the run's session on a Spark Connect server (`--conf spark.remote=sc://...`).

The server is the user's: it was started with its own master, memory and packages (the Delta
jar among them), so of the run's settings only the session's own (SQL settings Spark lets a
session change) go to it. The queries run on the server; their `foreachBatch` writer runs in a
Python process beside it, which imports the project from a zip sent as an artifact, and keeps
what it did beside the checkpoints (engine/lake/batch_records.py). The lake and the checkpoints
must therefore be at the same paths for this process and for the server (one machine, or a
shared file system).
"""

from __future__ import annotations

import urllib.parse
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING

from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

from engine.errors import UserError, first_line
from engine.reachable import CONNECT_TIMEOUT_S
from engine.runtime.cluster import project_zip
from engine.runtime.errors import without_sqlstate
from engine.runtime.scratch import scratch_folder

if TYPE_CHECKING:  # Spark Connect's client packages: a local run never loads them
    from pyspark.sql.connect.client.retries import RetryPolicy

__all__ = ["REMOTE", "connect_session", "is_connect", "isolated_session", "server_gone"]

#: The setting that names a Spark Connect server.
REMOTE = "spark.remote"


def is_connect(spark: SparkSession) -> bool:
    """Whether the session is a Spark Connect client (no SparkContext, no JVM here)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def _check_form(url: str) -> None:
    """`sc://HOST[:PORT]`, in one line of ours (pyspark's own messages run to three lines, and
    a port that is not a number is a bare ValueError there)."""
    parsed = urllib.parse.urlparse(url)
    try:
        port_ok = parsed.port is None or parsed.port > 0  # none: Spark's default port
    except ValueError:  # not a number, or out of range
        port_ok = False
    if parsed.scheme != "sc" or not parsed.hostname or not port_ok:
        raise UserError(f"--conf {REMOTE}={url}: expected sc://HOST:PORT")


def check_remote(url: str) -> None:
    """Fail in one line when the URL is not `sc://HOST:PORT` or no Spark Connect server answers
    there: the client would otherwise retry for minutes, or wait for ever on a port that
    accepts connections but does not speak gRPC."""
    _check_form(url)
    # Spark Connect's client packages (pyspark[connect]); a local run never loads them.
    import grpc
    from pyspark.sql.connect.client import DefaultChannelBuilder

    try:
        builder = DefaultChannelBuilder(url)
    except PySparkException as err:
        raise UserError(f"--conf {REMOTE}={url}: {first_line(err)}") from None
    channel = builder.toChannel()
    try:
        grpc.channel_ready_future(channel).result(timeout=CONNECT_TIMEOUT_S)
    except grpc.FutureTimeoutError:
        raise UserError(
            f"--conf {REMOTE}={url}: no Spark Connect server answers at {builder.endpoint} "
            f"within {CONNECT_TIMEOUT_S:g} s"
        ) from None
    finally:
        channel.close()


def connect_session(url: str, defaults: Mapping[str, str], conf: Mapping[str, str]) -> SparkSession:
    """A session on the server at `url`: the `defaults` the server lets a session change, and
    every setting of `conf` (the user's), which must be such a setting."""
    check_remote(url)
    spark = SparkSession.builder.remote(url).getOrCreate()
    spark.client.set_retry_policies([_retries()])  # type: ignore[attr-defined]
    # pyspark's warnings when the server stopped answering: the run ends with its own line then.
    for gave_up in (r"\[RETRIES_EXCEEDED\]", "StreamingQueryListenerBus Handler thread"):
        warnings.filterwarnings("ignore", message=gave_up, category=UserWarning)
    for key, value in conf.items():
        if key != REMOTE and not spark.conf.isModifiable(key):
            raise UserError(
                f"--conf {key}={value}: a setting of the Spark Connect server, not of a "
                "session; set it where the server starts"
            )
    settings = {k: v for k, v in defaults.items() if spark.conf.isModifiable(k)}
    settings.update((k, v) for k, v in conf.items() if k != REMOTE)
    for key, value in settings.items():
        try:
            spark.conf.set(key, value)
        except PySparkException as err:
            raise UserError(f"--conf {key}={value}: {without_sqlstate(first_line(err))}") from None
    # The handlers and the writer run in the server's Python processes: they import the
    # project's packages from this zip (the session keeps it until it ends).
    spark.addArtifacts(str(project_zip(scratch_folder("streamlake-pyfiles-"))), pyfile=True)
    return spark


def _retries() -> RetryPolicy:
    """pyspark's retries of a server that does not answer, shortened, and ended by `server_gone`.

    pyspark retries each call for ten minutes or more, and a run's loop, its clean-up and
    pyspark's own at exit make several calls in turn: a run whose server died printed nothing
    for an hour, and a stop signal waited as long. Here: waits of 0.05, 0.2, 0.8 and 3.2 s,
    then 5 s, about 25 s a call, enough for a network hiccup."""
    from pyspark.sql.connect.client.retries import DefaultPolicy

    class Retries(DefaultPolicy):
        gone = False  # set once the run found the server gone: calls under way stop retrying

        def can_retry(self, e: BaseException) -> bool:
            return not self.gone and super().can_retry(e)

    return Retries(max_retries=8, max_backoff=5000)


def server_gone(spark: SparkSession, err: BaseException) -> UserError | None:
    """The one line for a Spark Connect server that stopped answering during a run (None when
    `err` is something else). The session's later calls then fail at once: the run's clean-up
    and pyspark's own at exit would each retry it again."""
    if not is_connect(spark):
        return None
    import grpc
    from pyspark.errors.exceptions.connect import SparkConnectGrpcException

    if not isinstance(err, SparkConnectGrpcException):
        return None
    if err.getGrpcStatusCode() != grpc.StatusCode.UNAVAILABLE:
        return None
    for policy in spark.client.get_retry_policies():  # type: ignore[attr-defined]
        policy.gone = True
    endpoint = spark.client._builder.endpoint  # type: ignore[attr-defined]
    return UserError(
        f"--conf {REMOTE}=sc://{endpoint}: the Spark Connect server stopped answering during "
        "the run (its queries ran there): run again once it answers; the run resumes from its "
        "checkpoints"
    )


@contextmanager
def isolated_session(spark: SparkSession) -> Iterator[SparkSession]:
    """A new session beside `spark`, with temp views of its own, for the `with` block."""
    if not is_connect(spark):
        yield spark.newSession()  # shares the SparkContext: nothing of its own to stop
        return
    # The same server, through the connection settings `spark` was made with; made directly,
    # not by the builder, which would make it the process's default session. The server
    # forgets it when the block ends.
    channel = spark.client._builder  # type: ignore[attr-defined]
    other = type(spark)(connection=channel)
    try:
        yield other
    finally:
        other.stop()
