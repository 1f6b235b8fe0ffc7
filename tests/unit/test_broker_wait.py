"""When the run says that Spark's Kafka source waits on its broker: statuses in, lines out."""

from __future__ import annotations

import pytest

from engine.runtime.broker_wait import BrokerWait

ASKING = "Getting offsets from KafkaV2[Subscribe[sensor-readings]]"
IDLE = "Waiting for next trigger"
UNREACHABLE = (
    "query main: kafka broker b:9092 unreachable (kafka.bootstrap.servers): "
    "no offsets for {n} s (source.timeout); Spark's client keeps asking"
)
BACK = "query main: kafka broker b:9092 answered again after {n} s"


@pytest.mark.parametrize(
    ("statuses", "said"),
    [
        # A trigger asks for offsets and gets them: nothing to say.
        ([(0, ASKING), (0.2, IDLE), (1, ASKING), (1.2, IDLE)], []),
        # Asking for less than the patience, twice: each wait counts from its own start.
        ([(0, ASKING), (9, IDLE), (10, ASKING), (19, IDLE)], []),
        # Past the patience: said once, however long the wait, then once when it ends.
        (
            [(0, ASKING), (5, ASKING), (10, ASKING), (40, ASKING), (95, "Processing new data")],
            [("waiting", UNREACHABLE.format(n=10)), ("resumed", BACK.format(n=95))],
        ),
        # A second outage is said again.
        (
            [(0, ASKING), (12, ASKING), (13, IDLE), (20, ASKING), (31, ASKING), (32, IDLE)],
            [
                ("waiting", UNREACHABLE.format(n=12)),
                ("resumed", BACK.format(n=13)),
                ("waiting", UNREACHABLE.format(n=11)),
                ("resumed", BACK.format(n=12)),
            ],
        ),
    ],
)
def test_a_wait_is_said_once_past_the_patience_and_once_when_it_ends(
    statuses: list[tuple[float, str]], said: list[tuple[str, str]]
) -> None:
    watch = BrokerWait("b:9092", patience_s=10)
    news = [watch.observe("main", message, now) for now, message in statuses]
    assert [tuple(n) for n in news if n] == said


def test_each_query_waits_on_its_own() -> None:
    watch = BrokerWait("b:9092", patience_s=10)
    assert watch.observe("main", ASKING, 0) is None
    assert watch.observe("alerts", ASKING, 5) is None
    assert watch.observe("main", ASKING, 10).status == "waiting"
    assert watch.observe("alerts", ASKING, 10) is None
    assert watch.observe("alerts", ASKING, 15).status == "waiting"
    assert watch.observe("main", IDLE, 16).status == "resumed"
    assert watch.observe("alerts", ASKING, 16) is None
