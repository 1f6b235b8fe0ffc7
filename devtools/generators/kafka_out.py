"""Writing generated lines to a Kafka topic, for ``--out kafka://HOST:PORT/TOPIC``.

:func:`parse_kafka_url` reads the URL; :class:`KafkaTopic` checks the broker, creates the topic
if it is missing, and produces lines in order with the engine's idempotent producer
(:class:`~engine.sinks.kafka_producer.KafkaProducer`).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from engine.errors import UserError
from engine.sinks.kafka_producer import KafkaDeliveryError, KafkaProducer

if TYPE_CHECKING:
    # confluent_kafka is imported only when writing to Kafka.
    from confluent_kafka import KafkaError

__all__ = ["KafkaTopic", "parse_kafka_url"]

_KAFKA_URL = re.compile(r"kafka://([^/:\s]+):(\d{1,5})/([A-Za-z0-9._-]{1,249})")
# librdkafka retries a refused connection every few milliseconds and logs each attempt; its
# logs go here instead of stderr, and the reason for a failure goes into the UserError.
_KAFKA_LOG = logging.getLogger(__name__)
_KAFKA_LOG.addHandler(logging.NullHandler())
_KAFKA_LOG.propagate = False


def parse_kafka_url(url: str) -> tuple[str, str]:
    """Split ``kafka://HOST:PORT/TOPIC`` into ``("HOST:PORT", "TOPIC")``; UserError if malformed."""
    match = _KAFKA_URL.fullmatch(url)
    if match is None or not 0 < int(match[2]) < 65536:
        raise UserError(f"--out: expected kafka://HOST:PORT/TOPIC, got {url!r}")
    return f"{match[1]}:{match[2]}", match[3]


class KafkaTopic:
    """A producer to one topic; opening it checks the broker and creates the topic if missing.

    Problems (broker unreachable, topic not creatable, messages not delivered) are UserErrors
    that name ``--out``. Call :meth:`close` when done.
    """

    def __init__(self, servers: str, topic: str) -> None:
        self._servers = servers
        self._topic = topic
        # Only the latest client error is kept: a refused connection is retried every few ms.
        self._last_error = ""
        self._brokers_down = False
        self._kafka = KafkaProducer(
            {
                "bootstrap.servers": servers,
                "enable.idempotence": True,
                "linger.ms": 20,
                # Undelivered messages fail within the final flush's wait, with their reason.
                "message.timeout.ms": 60_000,
                "logger": _KAFKA_LOG,
                "error_cb": self._on_error,
            }
        )
        try:
            self._check_topic()
        except UserError:
            self._kafka.close()
            raise

    def write(
        self,
        lines: Iterable[tuple[str | bytes, str | None]],
        report: Callable[[], None] = lambda: None,
    ) -> None:
        """Produce every ``(text, key)`` in order (key None: no key; text as str or as the
        bytes to send); UserError if one failed. ``report`` is called every 1000 lines, e.g.
        to move a progress bar.
        """
        from confluent_kafka import KafkaException

        try:
            for number, (text, key) in enumerate(lines):
                self._kafka.send(self._topic, text, key)
                if number % 1000 == 0:
                    report()
            self._kafka.flush(60)
        except KafkaDeliveryError as err:
            raise self._fail(str(err)) from None
        except KafkaException as err:
            raise self._fail(err.args[0].str()) from None

    def close(self) -> None:
        """Close the producer; what a failed write left queued is dropped."""
        self._kafka.close()

    def _check_topic(self) -> None:
        from confluent_kafka import KafkaException

        from devtools.broker import create_topics

        deadline = time.monotonic() + 10
        attempts = 0
        while True:
            attempts += 1
            try:
                metadata = self._kafka.client.list_topics(timeout=1)
                break
            except KafkaException as err:
                self._kafka.poll()  # serves error_cb
                # Nothing listening (connection refused) is clear after a retry; an address
                # that does not answer at all gets the whole 10 s.
                if (self._brokers_down and attempts >= 2) or time.monotonic() >= deadline:
                    raise self._fail(err.args[0].str()) from None
        found = metadata.topics.get(self._topic)
        if found is None or found.error is not None:
            try:
                create_topics(self._servers, [self._topic])
            except (UserError, KafkaException) as err:
                raise self._fail(str(err)) from None

    def _fail(self, reason: str) -> UserError:
        last = f" ({self._last_error})" if self._last_error else ""
        return UserError(
            f"--out: kafka broker {self._servers} unreachable or topic {self._topic} missing: "
            f"{reason}{last}"
        )

    def _on_error(self, err: KafkaError) -> None:
        from confluent_kafka import KafkaError

        self._last_error = err.str()
        self._brokers_down |= err.code() == KafkaError._ALL_BROKERS_DOWN
