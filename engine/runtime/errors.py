"""Spark's errors as the one line a user sees: ours when our code raised in a worker."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from engine.errors import KafkaUnavailable, UserError, first_line
from engine.lake.delta_source import rewritten
from engine.project import shown

__all__ = [
    "WorkerStartFailed",
    "as_user_error",
    "spark_error_line",
    "sql_location",
    "without_sqlstate",
]


class WorkerStartFailed(RuntimeError):
    """Spark gave up on a Python worker that did not connect back within its fixed 10 s, as on
    a machine too busy to start it: transient, so the run restarts the query."""


# Our own errors raised in Spark's Python workers reach the driver inside Spark's message.
_OWN_ERROR = re.compile(r"\b(UserError|KafkaUnavailable): (.+)")
_SQLSTATE = re.compile(r"\s*SQLSTATE: \w+\s*$")
# What spark_error_line appends to say where, when it knows no file: the SQL or the frame.
_WHERE_SAID = re.compile(r" \((?:in SQL .*|\S+:\d+ in \w+)\)$")
# Spark's context for an error in SQL it ran: the line it quotes, and carets under the fault.
_SQL_CONTEXT = re.compile(
    r"^== SQL(?: of VIEW (\S+))? \(line \d+, position \d+\) ==\n(.*)$(?:\n( *)(\^+))?", re.M
)
# A Python error (in a foreachBatch function or a worker) reaches the query as Spark's wrapper
# around its traceback: the error is the traceback's last line, with Spark's SQL context after
# it when Spark has one, and the innermost frame outside installed packages says where.
_TRACEBACK = "Traceback (most recent call last):"
_RAISED = re.compile(
    r"^([\w.]*(?:Exception|Error))(?:: (.*))?$(?:\n== SQL.*==$)?(?:\n(\.\.\..*\.\.\.)$)?",
    re.M,
)
_FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+), in (\S+)$', re.M)
# A JVM error raised by a Spark call in our Python (a write's count(), save()) reaches the
# traceback as Py4JJavaError, whose own text only names the call; the JVM's error follows it
# on a line of its own, and the innermost "Caused by" is what went wrong underneath (a file
# that is not gzip, a permission denied).
_JAVA_ERROR = re.compile(r"^: ([\w.$]+): (.+)$", re.M)
_JAVA_CAUSE = re.compile(r"^Caused by: ([\w.$]+): (.+)$", re.M)
# Errors of Spark's that the input or a source option causes (an input file it cannot read,
# `--conf source.maxFilesPerTrigger=abc`), not the pipeline or the machine: a usage error.
_INPUT_ERRORS = ("[FAILED_READ_FILE", "Invalid value ")
# Spark's Kafka source finding that the broker no longer has offsets the checkpoint read (a
# topic recreated, a broker that came back empty, retention). Its text names Spark's option;
# the user sets the pipeline's, as with the Python source (engine/sources/kafka.py).
_KAFKA_DATA_LOSS = "Some data may have been lost because they are not available in Kafka any more"
_KAFKA_LOSS_REASON = re.compile(r"^Reason: (.+?)\.?$", re.M)
# Delta's streaming source finding rows deleted or rewritten in the table it reads (the
# writing pipeline's --full-refresh, a DELETE, a MERGE): a stream of appends cannot follow.
_DELTA_SOURCE_CHANGED = re.compile(
    r"\[DELTA_SOURCE_(?:IGNORE_DELETE|TABLE_IGNORE_CHANGES)\].*? at version (\d+)\."
    r".*The source table can be found at path (\S+?)\.?(?:\s|$)",
    re.S,
)
# Spark's Kafka client giving up on a broker that went away mid-batch: Kafka's own clients
# (default.api.timeout.ms, 60 s; the sink's max.block.ms), or Spark's executor consumer finding
# no records in a poll (source option kafkaConsumer.pollTimeoutMs, 120 s).
_KAFKA_TIMEOUT = re.compile(
    r"org\.apache\.kafka\.common\.errors\.TimeoutException: (.+)"
    r"|java\.util\.concurrent\.TimeoutException: (Cannot fetch record .+)"
)
# Spark starting a Python worker (a Python source's, in the driver) waits a fixed 10 s
# for it to connect back; a busy machine can take longer to start Python.
_WORKER_START = ("Python worker failed to connect back", "for the Python worker to connect back")
# Spark's Kafka client refusing the pipeline's `kafka:` settings (a value, or two together).
_KAFKA_CONFIG = re.compile(r"org\.apache\.kafka\.common\.config\.ConfigException: (.+)")


def without_sqlstate(text: str) -> str:
    """`text` without the ` SQLSTATE: ...` Spark ends its error messages with."""
    return _SQLSTATE.sub("", text).strip()


def _message(err: Exception) -> str:
    # pyspark builds the message of a JVM error from Spark's own list of error classes, and
    # fails on one it lacks (delta-spark's DELTA_* classes: "Cannot find main error class");
    # the error's own text then says the same.
    try:
        return str(getattr(err, "getMessage", lambda: "")() or err)
    except Exception:
        return str(err)


def spark_error_line(err: Exception) -> str:
    """The first meaningful line of a Spark error, without the JVM stack trace."""
    text = _message(err).strip()
    own = _OWN_ERROR.search(text)
    if own:
        # raise_error() in SQL (a FAIL UPDATE expectation) ends the line with Spark's state.
        return without_sqlstate(own.group(2))
    if _TRACEBACK in text:
        tail = text[text.index(_TRACEBACK) :].split("\n=== Streaming Query ===", 1)[0]
        raised = list(_RAISED.finditer(tail))
        if raised:
            return _python_error(tail, raised[-1])
    return first_line(text) if text else type(err).__name__


def _python_error(tail: str, raised: re.Match[str]) -> str:
    kind, message, context = raised.group(1), raised.group(2) or "", raised.group(3)
    if kind.endswith("Py4JJavaError"):
        java = _java_error(tail[raised.end() :])
        if java:
            return java
    message = without_sqlstate(message)
    if context:
        return f"{message} (in SQL {context})"
    if not message.startswith("["):  # not one of Spark's error classes: name the Python one
        message = f"{kind.rsplit('.', 1)[-1]}: {message}" if message else kind.rsplit(".", 1)[-1]
    frames = [
        f
        for f in _FRAME.finditer(tail, 0, raised.start())
        if "site-packages" not in f.group(1) and "/lib/python" not in f.group(1)
    ]
    if not frames:
        return message
    path, line, function = frames[-1].groups()
    return f"{message} ({shown(path)}:{line} in {function})"


def _java_error(text: str) -> str:
    """The JVM error after a Py4JJavaError, with its innermost cause: '' when there is none."""
    error = _JAVA_ERROR.search(text)
    if not error:
        return ""
    message = without_sqlstate(error.group(2))
    causes = [
        c for c in _JAVA_CAUSE.finditer(text, error.end()) if not c.group(1).startswith("py4j")
    ]
    if causes:
        kind, cause = causes[-1].group(1).rsplit(".", 1)[-1], causes[-1].group(2).strip()
        if cause not in message:
            message = f"{message} ({kind}: {cause})"
    return message


def as_user_error(
    err: Exception,
    prefix: str = "",
    *,
    kafka_servers: str = "",
    views: Mapping[str, Path] | None = None,
) -> Exception:
    """The error to raise for a failed Spark job, as one line after `prefix`: ours (UserError,
    KafkaUnavailable) when our code raised it in a worker, an input file could not be read, a
    source option is invalid, a Delta source table had rows rewritten, the Kafka broker at
    `kafka_servers` lost data or went away, or Spark's context points into the SQL file of one
    of `views` (named with its line); WorkerStartFailed when a Python worker did not start in
    time; else a RuntimeError."""
    text = _message(err)
    lost = _kafka_data_loss(text)
    if lost:
        return UserError(prefix + lost)
    changed = _DELTA_SOURCE_CHANGED.search(text)
    if changed:
        version, path = changed.group(1), changed.group(2).removeprefix("file:")
        return UserError(prefix + rewritten(path, int(version)))
    if kafka_servers:
        full = text + "\n" + _jvm_traces(err)
        config = _KAFKA_CONFIG.search(full)
        if config:
            return UserError(f"{prefix}kafka settings: {config.group(1).strip()}")
        timeout = _KAFKA_TIMEOUT.search(full)
        if timeout:
            why = without_sqlstate(timeout.group(1) or timeout.group(2))
            return KafkaUnavailable(prefix + str(KafkaUnavailable.broker(kafka_servers, why)))
    if any(said in text for said in _WORKER_START):
        return WorkerStartFailed(prefix + spark_error_line(err).rstrip("."))
    own = _OWN_ERROR.search(text)
    kind = {"UserError": UserError, "KafkaUnavailable": KafkaUnavailable}.get(
        own.group(1) if own else "", RuntimeError
    )
    line = spark_error_line(err)
    if line.startswith(_INPUT_ERRORS):
        kind = UserError
    where = sql_location(text, views) if views and kind is RuntimeError else None
    if where:
        # The file and line say where: not the SQL excerpt, nor the engine's frame that ran it.
        return UserError(f"{prefix}{where}: {_WHERE_SAID.sub('', without_sqlstate(line))}")
    return kind(prefix + line)


def sql_location(text: str, views: Mapping[str, Path]) -> str | None:
    """Where in the views' SQL files the error Spark quotes is: `== SQL of VIEW kept (line 1,
    position 12) ==`, the line (cut with `...` at either end) and carets under the fault.
    `file:line:column` of the one place with that line, or else with the underlined text (a
    step run on the batch is SQL that sqlglot wrote again, on one line); the view's file alone
    when it is named; else None."""
    quoted = _SQL_CONTEXT.search(text)
    if not quoted:
        return None
    view, shown, spaces, carets = quoted.groups()
    files = [views[view.lower()]] if view and view.lower() in views else list(views.values())
    texts = {path: path.read_text().splitlines() for path in dict.fromkeys(files) if path.is_file()}
    cut = len(shown) - len(shown.removeprefix("..."))
    whole = shown[cut:].removesuffix("...")
    found = _places(texts, whole, (len(spaces) - cut) if carets else None)
    if len(found) != 1 and carets:
        fault = shown[len(spaces) : len(spaces) + len(carets)]
        found = _places(texts, fault, 0, fold=True)
    if len(found) == 1:
        return found[0]
    return str(files[0]) if view and len(files) == 1 else None


def _places(
    texts: Mapping[Path, list[str]], wanted: str, offset: int | None, *, fold: bool = False
) -> list[str]:
    """`file:line[:column]` of each line holding `wanted`; the column is `offset` characters
    into it (none when `offset` is None)."""
    if not wanted.strip():
        return []
    found = []
    for path, lines in texts.items():
        for number, line in enumerate(lines, 1):
            at = (line.lower() if fold else line).find(wanted.lower() if fold else wanted)
            if at >= 0:
                column = f":{at + offset + 1}" if offset is not None else ""
                found.append(f"{path}:{number}{column}")
    return found


def _jvm_traces(err: BaseException) -> str:
    """The JVM stack traces of `err` and its causes. The error Spark's Kafka client gave can be
    a cause that only they name (above it, "Failed to create new KafkaAdminClient"); pyspark
    keeps them without a public name."""
    traces = []
    seen: BaseException | None = err
    while seen is not None and len(traces) < 8:
        traces.append(str(getattr(seen, "_stackTrace", "") or ""))
        seen = getattr(seen, "_cause", None)
    return "\n".join(traces)


def _kafka_data_loss(text: str) -> str | None:
    """Spark's Kafka data-loss error as the line the Python source gives, or None."""
    if _KAFKA_DATA_LOSS not in text:
        return None
    reason = _KAFKA_LOSS_REASON.search(text)
    return (
        "kafka source: the broker lost data the checkpoint had read"
        + (f" ({reason.group(1)})" if reason else "")
        + "; set source.failOnDataLoss=false to go on"
    )
