"""Which of a pipeline's `kafka:` settings librdkafka (confluent-kafka) is given.

The settings go to both Kafka clients: Spark's Java client with the native connector, and
librdkafka for the Python connector and for the checks a run makes (broker, topics,
retention). The two know different names (`default.api.timeout.ms` is Java's only,
`socket.keepalive.enable` librdkafka's) and values, and librdkafka refuses to build a client
with a setting it does not know or a value it cannot read.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from engine.errors import UserError

__all__ = ["check_spark_client", "librdkafka_settings"]

_UNKNOWN = "No such configuration property"


def librdkafka_settings(settings: Mapping[str, Any], *, strict: bool) -> dict[str, Any]:
    """`settings` for librdkafka. `strict` (librdkafka is the pipeline's Kafka client): a name
    it does not know or a value it refuses is a UserError naming the setting; else (they are
    for Spark's Java client) such settings are left out."""
    items = tuple(sorted((k, str(v)) for k, v in settings.items()))
    left = _refused(items, strict)
    return {k: v for k, v in settings.items() if k not in left}


@functools.cache
def _refused(settings: tuple[tuple[str, str], ...], strict: bool) -> frozenset[str]:
    # A client is only built, never connected: librdkafka checks each setting as it is set.
    left = dict(settings)
    refused: set[str] = set()
    while (why := _refusal(left)) is not None:
        name = next((k for k in left if why == f'{_UNKNOWN}: "{k}"'), None)
        if name is None:
            name = next((k for k in left if _refusal({k: left[k]}) is not None), None)
            if name is None:  # refused together only
                raise UserError(f"kafka settings: librdkafka refuses them together: {why}")
            if strict:
                raise UserError(f"kafka.{name}: librdkafka refuses {left[name]!r}: {why}")
        elif strict:
            raise UserError(
                f"kafka.{name}: no such setting in librdkafka, the Kafka client of the "
                "Python connector (source.connector)"
            )
        refused.add(name)
        del left[name]
    return frozenset(refused)


def _refusal(settings: Mapping[str, str]) -> str | None:
    """Why librdkafka refuses a client with `settings`, or None."""
    from confluent_kafka import KafkaException, Producer

    try:
        Producer({**settings, "log_level": 0})
    except KafkaException as err:
        return err.args[0].str()
    return None


def check_spark_client(servers: str, cluster_id: str | None) -> None:
    """Refuse Spark's Kafka connector a tansu broker (known by its cluster id, `tansu_cluster`
    unless set otherwise): Spark's Java client reads one record of each batch a producer sent
    there, and its writes do not arrive, without an error (docs/decisions.md)."""
    if (cluster_id or "").startswith("tansu"):
        raise UserError(
            f"source.connector: Spark's Kafka connector (native, the default where its jar is "
            f"there) loses records on the tansu broker at {servers}; set "
            "source.connector=python, or run Apache Kafka (`runner.py broker --kind kafka`)"
        )
