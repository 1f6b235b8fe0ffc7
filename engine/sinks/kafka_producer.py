"""The one way this project produces to Kafka: confluent-kafka's producer, made from a settings
dict, that waits for room when its local queue is full and raises one line when messages were
not delivered. Used by the topic sink, the generators' Kafka output and the benchmarks."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from engine.errors import KafkaUnavailable

__all__ = ["KafkaDeliveryError", "KafkaProducer"]

# Delivery reports are served this often while sending, so that failures show up early.
_POLL_EVERY = 1000


class KafkaDeliveryError(KafkaUnavailable):
    """Messages given to a KafkaProducer were not delivered: one line with the topic, how many
    and librdkafka's reason."""

    def __init__(self, topic: str, failed: int, sent: int, reason: str) -> None:
        super().__init__(f"{failed} of {sent} messages to topic {topic} not delivered ({reason})")
        self.topic = topic
        self.failed = failed
        self.sent = sent
        self.reason = reason


class KafkaProducer:
    """A confluent-kafka Producer made from librdkafka `settings` (`client`, for what this does
    not cover, such as metadata). Errors count the messages sent since the last good flush.

    After a failure the producer is spent (an idempotent producer cannot go on after one):
    every further send raises the same error.
    """

    def __init__(self, settings: Mapping[str, Any]) -> None:
        from confluent_kafka import Producer

        self.client = Producer({**settings, "on_delivery": self._delivered})
        self._sent = 0
        self._failed = 0
        self._reason = ""
        self._topic = ""

    def send(
        self,
        topic: str,
        value: str | bytes | None,
        key: str | bytes | None = None,
        partition: int | None = None,
        headers: Sequence[tuple[str, bytes]] | None = None,
    ) -> None:
        """Queue one message, waiting while the local queue is full; KafkaDeliveryError once a
        message sent before has failed (confluent_kafka.KafkaException if it cannot be queued)."""
        if self._failed:
            raise self._error()
        partition = -1 if partition is None else partition  # -1: the partitioner chooses
        while True:
            try:
                self.client.produce(
                    topic, value=value, key=key, partition=partition, headers=headers
                )
                break
            except BufferError:
                # Deliveries, or failures after message.timeout.ms, make room in the queue.
                self.client.poll(0.1)
                if self._failed:
                    raise self._error() from None
        self._topic = topic
        self._sent += 1
        if self._sent % _POLL_EVERY == 0:
            self.client.poll(0)

    def poll(self, timeout: float = 0.0) -> None:
        """Serve delivery reports, waiting up to `timeout` seconds for one."""
        self.client.poll(timeout)

    def flush(self, timeout: float) -> None:
        """Wait up to `timeout` seconds until every message sent is acknowledged;
        KafkaDeliveryError, the rest dropped, if any was not."""
        left = self.client.flush(timeout)
        if left and not self._reason:
            self._reason = f"not acknowledged within {timeout:g} s"
        if self._failed or left:
            raise self._error()
        self._sent = 0

    def close(self) -> None:
        """Drop what is still queued (nothing after a good flush) and close the client."""
        self.client.purge()
        self.client.flush(0)
        self.client.close()

    def _error(self) -> KafkaDeliveryError:
        # What is still queued would fail too, and waiting for it only delays the error.
        self.client.purge()
        self.client.flush(0)  # serves the purged messages' reports: they count as failed
        return KafkaDeliveryError(self._topic, self._failed, self._sent, self._reason)

    def _delivered(self, err: Any, message: Any) -> None:
        if err is not None:
            self._failed += 1
            if not self._reason:  # the first failure says why; the purged ones after it do not
                self._reason, self._topic = err.str(), message.topic()
