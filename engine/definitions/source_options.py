"""A source's options by kind: a misspelt one is refused, not passed to a reader that ignores
it (Spark's readers ignore any option they do not know, so `maxFilesPerTriger` read the whole
folder in one batch)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.errors import UserError, closest

__all__ = ["check_source_options", "options_for", "spark_kafka_only"]

# This project's Kafka options, which both connectors read (engine/sources/kafka_topic.py).
_BOTH_KAFKA_CONNECTORS = (
    "topic",
    "startingOffsets",
    "maxRecordsPerBatch",
    "timeout",
    "failOnDataLoss",
    "connector",
)
# The options each kind's reader takes, as their documentation names them. A socket and the
# Python Kafka source read only their own; Spark's file, Kafka and Delta readers take more than
# these (and `fs.*`-style Hadoop settings), so there only a near miss of one of these is refused.
_KNOWN: Mapping[str, tuple[str, ...]] = {
    "socket": ("host", "port"),
    "kafka": (
        *_BOTH_KAFKA_CONNECTORS,
        # Spark's connector's own
        "startingOffsetsByTimestamp",
        "startingTimestamp",
        "startingOffsetsByTimestampStrategy",
        "minPartitions",
        "groupIdPrefix",
        "includeHeaders",
        "minOffsetsPerTrigger",
        "maxTriggerDelay",
        "fetchOffset.numRetries",
        "fetchOffset.retryIntervalMs",
        "kafkaConsumer.pollTimeoutMs",
    ),
    "files": (
        "maxFilesPerTrigger",
        "maxBytesPerTrigger",
        "latestFirst",
        "fileNameOnly",
        "maxFileAge",
        "maxCachedFiles",
        "discardCachedInputRatio",
        "cleanSource",
        "sourceArchiveDir",
        "pathGlobFilter",
        "recursiveFileLookup",
        "modifiedBefore",
        "modifiedAfter",
        "ignoreCorruptFiles",
        "ignoreMissingFiles",
        "wholetext",
        "lineSep",
    ),
    "delta": (
        "maxFilesPerTrigger",
        "maxBytesPerTrigger",
        "ignoreDeletes",
        "ignoreChanges",
        "skipChangeCommits",
        "startingVersion",
        "startingTimestamp",
        "readChangeFeed",
        "withEventTimeOrder",
        "schemaTrackingLocation",
        "excludeRegex",
        "failOnDataLoss",
    ),
}
# Spark's Kafka options that are whole numbers: Spark's own refusal of another value
# (`For input string: "abc"`, exit 1) names no option.
_KAFKA_WHOLE_NUMBERS = (
    "minPartitions",
    "minOffsetsPerTrigger",
    "fetchOffset.numRetries",
    "fetchOffset.retryIntervalMs",
    "kafkaConsumer.pollTimeoutMs",
    "startingTimestamp",
)
# Spark's Kafka options for batch reads, which a stream refuses.
_KAFKA_BATCH_ONLY = ("endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp")
# Spark's names for what this project's Kafka options say, for both connectors.
_RENAMED: Mapping[str, str] = {"maxOffsetsPerTrigger": "maxRecordsPerBatch", "subscribe": "topic"}
# Readers that take nothing but their own options; and those that read names exactly (Spark's
# readers ignore case, this project's Kafka source does not).
_CLOSED = ("socket",)
_EXACT = ("socket", "kafka")


def check_source_options(kind: str, options: Mapping[str, Any], where: str) -> None:
    """Refuse an option the `kind` of source does not take: any unknown one for a socket, and
    for the other kinds a near miss of a known name, which is a typo; other names go to Spark's
    reader, which may know them. `where` goes before the name (`--conf source.`, or the spec
    file's `<path>: source.options.`)."""
    known = _KNOWN[kind]
    by_lower = {k.lower(): k for k in known}
    for name in options:
        if kind == "kafka" and name in _KAFKA_WHOLE_NUMBERS:
            value = str(options[name]).strip()
            if not value.lstrip("-").isdigit():
                raise UserError(f"{where}{name}: a whole number, not {options[name]!r}")
        if name in known or name.startswith("kafka."):
            continue
        if kind not in _EXACT and name.lower() in by_lower:
            continue
        if kind == "kafka" and name in _KAFKA_BATCH_ONLY:
            raise UserError(
                f"{where}{name}: Spark's Kafka connector reads it in batch queries only; a "
                "pipeline's stream reads on (--once stops at what the topic holds at the start)"
            )
        if kind == "kafka" and name in _RENAMED:
            raise UserError(
                f"{where}{name}: write {_RENAMED[name]}, this project's name for it (both Kafka "
                "connectors read it)"
            )
        close = closest(name.lower(), by_lower)
        if close or kind in _CLOSED:
            meant = f"; did you mean {by_lower[close]}?" if close else ""
            raise UserError(
                f"{where}{name}: not an option of a {kind} source{meant} "
                f"(options: {', '.join(known)})"
            )


def options_for(kind: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """Of a spec's options, written for a source of another kind, those `kind`'s reader also
    takes (a socket's `host` is nothing to a Kafka topic; the Python Kafka source refuses it)."""
    if kind in _EXACT:
        return {name: value for name, value in options.items() if name in _KNOWN[kind]}
    known = {k.lower() for k in _KNOWN[kind]}
    return {name: value for name, value in options.items() if name.lower() in known}


def spark_kafka_only(options: Mapping[str, Any]) -> list[str]:
    """The options that only Spark's Kafka connector reads: the Python source would ignore
    them (a `startingTimestamp` read the topic from its start)."""
    return [
        name
        for name in options
        if name not in _BOTH_KAFKA_CONNECTORS and not name.startswith("kafka.")
    ]
