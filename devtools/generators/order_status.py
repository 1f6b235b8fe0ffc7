"""Orders for the ``order_status`` pipeline (seed 003): one JSON object per line.

The lines are exactly those the order server (:mod:`devtools.order_server`) sends for the same
seed: ``{"order_id": "o-00000001", "status": "PLACED"}``, ... With ``faults=True`` about
:data:`MALFORMED_RATE` extra lines are malformed (not JSON, JSON without a ``status``, or a
status outside :data:`~devtools.order_server.STATUSES`), each after a valid order; the valid
orders stay the same. The lines go to numbered part files in a folder or, for
``kafka://HOST:PORT/TOPIC``, to a Kafka topic (no keys), in the same order either way.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path

from devtools.generators import Summary, open_lines, progress_bar
from devtools.order_server import STATUSES, orders

__all__ = ["MALFORMED_RATE", "GenerationSummary", "OrderLines", "generate_order_status"]

MALFORMED_RATE = 0.01
"""With ``faults=True``: malformed lines per valid order (at least one malformed line)."""

_NOT_JSON = (
    "connection reset by peer",
    "<html><body>502 Bad Gateway</body></html>",
    "order_id,status",
    "ERROR order feed: upstream timeout",
)
_BAD_STATUSES: tuple[object, ...] = (
    "SHIPPED",
    "REFUNDED",
    "placed",
    "Completed",
    "IN_PROGRESS",
    "",
    None,
    3,
)


@dataclass(frozen=True)
class GenerationSummary(Summary):
    """What was written; ``lines`` = ``orders`` + ``malformed``.

    ``orders`` counts valid orders and ``by_status`` splits them (every status, in
    :data:`~devtools.order_server.STATUSES` order); ``files`` is 0 for Kafka output.
    """

    lines: int
    orders: int
    malformed: int
    files: int
    by_status: dict[str, int] = field(default_factory=dict)


def generate_order_status(
    out: str | Path,
    *,
    events: int,
    seed: int = 0,
    faults: bool = False,
    lines_per_file: int = 1000,
    progress: bool = False,
) -> GenerationSummary:
    """Write ``events`` valid orders (plus malformed lines if asked) to a folder or a topic.

    ``out`` is a folder (``out/part-00001.json``, ...; FileExistsError if it is not empty) or
    ``kafka://HOST:PORT/TOPIC`` (the topic is created if missing). The same arguments always
    give the same lines.
    """
    if lines_per_file < 1:
        raise ValueError(f"lines_per_file must be at least 1, got {lines_per_file}")
    lines = OrderLines(events=events, seed=seed, faults=faults)
    bar = progress_bar(
        total=events, unit="order", desc="orders", done=lambda: lines.orders, enabled=progress
    )
    # The output is opened first: a full folder or a broker that is not there is refused
    # before the bar is drawn.
    with open_lines(out, lines_per_file=lines_per_file) as write, bar as report:
        files = write(lines, report)
    return lines.summary(files=files)


class OrderLines:
    """The generated lines in write order: iterate once for ``(line, None)`` pairs.

    Counts grow while iterating; :meth:`summary` gives them.
    """

    def __init__(self, *, events: int, seed: int = 0, faults: bool = False) -> None:
        if events < 1:
            raise ValueError(f"events must be at least 1, got {events}")
        self._events_wanted = events
        self._seed = seed
        self._faults = faults
        self._started = False
        self.lines = self.orders = self.malformed = 0
        self.by_status = dict.fromkeys(STATUSES, 0)

    def __iter__(self) -> Iterator[tuple[str, str | None]]:
        if self._started:
            raise RuntimeError("OrderLines can be iterated only once")
        self._started = True
        return self._run()

    def summary(self, *, files: int = 0) -> GenerationSummary:
        """Counts of what has been iterated so far."""
        return GenerationSummary(
            lines=self.lines,
            orders=self.orders,
            malformed=self.malformed,
            files=files,
            by_status=dict(self.by_status),
        )

    def _run(self) -> Iterator[tuple[str, str | None]]:
        events = self._events_wanted
        # Faults have their own generator, apart from the one inside orders(seed): with or
        # without them the valid orders are the same.
        rng = random.Random(f"order_status faults {self._seed}")
        malformed_after: set[int] = set()
        if self._faults:
            wanted = max(1, round(events * MALFORMED_RATE))
            malformed_after = set(rng.sample(range(events), min(events, wanted)))
        for index, order in enumerate(islice(orders(self._seed), events)):
            # The order server's serialisation: json.dumps of the dict, one per line.
            text = json.dumps(order)
            self.lines += 1
            self.orders += 1
            self.by_status[order["status"]] += 1
            yield text, None
            if index in malformed_after:
                self.lines += 1
                self.malformed += 1
                yield _malformed(rng, order, text), None


def _malformed(rng: random.Random, order: dict[str, str], text: str) -> str:
    """A broken line near ``order``: not JSON, JSON without a status, or a bad status."""
    order_id = order["order_id"]
    r = rng.random()
    if r < 0.25:
        # Any proper, non-empty prefix of a JSON object is invalid: a write cut short.
        return text[: rng.randint(1, len(text) - 2)]
    if r < 0.4:
        return rng.choice(_NOT_JSON)
    if r < 0.5:
        # Valid JSON, but not an object.
        return json.dumps([order_id, order["status"]])
    if r < 0.65:
        return json.dumps({"order_id": order_id})
    if r < 0.75:
        return json.dumps({"order_id": order_id, "state": order["status"]})
    return json.dumps({"order_id": order_id, "status": rng.choice(_BAD_STATUSES)})
