"""Says when Spark's Kafka connector is waiting on a broker that does not answer.

Spark's client retries such a broker by itself, for minutes and without a word, where the Python
source fails the query after `source.timeout` and the run says so and retries it. Watching the
query's status gives a continuous run on either connector a line when the broker goes away."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, NamedTuple

from engine.errors import KafkaUnavailable

__all__ = ["BrokerWait", "WaitNews"]

# A query's status while Spark's Kafka source asks the broker for its latest offsets.
ASKING = "Getting offsets from KafkaV2"


class WaitNews(NamedTuple):
    """What changed for a query: it started waiting, or its broker answered again."""

    status: Literal["waiting", "resumed"]
    line: str


@dataclass
class BrokerWait:
    """Lines for queries whose Kafka source has asked `servers` for longer than `patience_s`."""

    servers: str
    patience_s: float
    _asking_since: dict[str, float] = field(default_factory=dict)
    _reported: set[str] = field(default_factory=set)

    def observe(self, query: str, status_message: str, now: float) -> WaitNews | None:
        """News of `query`, whose status reads `status_message` at `now` (seconds), or None:
        once when its wait passes the patience, once when that wait ends."""
        if not status_message.startswith(ASKING):
            since = self._asking_since.pop(query, now)
            if query not in self._reported:
                return None
            self._reported.discard(query)
            back = f"kafka broker {self.servers} answered again after {now - since:.0f} s"
            return WaitNews("resumed", f"query {query}: {back}")
        since = self._asking_since.setdefault(query, now)
        if query in self._reported or now - since < self.patience_s:
            return None
        self._reported.add(query)
        why = f"no offsets for {now - since:.0f} s (source.timeout)"
        unreachable = KafkaUnavailable.broker(self.servers, why)
        return WaitNews("waiting", f"query {query}: {unreachable}; Spark's client keeps asking")
