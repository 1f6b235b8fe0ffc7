"""Synthetic e-commerce server logs: one JSON object per line, in numbered part files.

Customers browse in sessions, fill carts, buy what they carted and sometimes log out; with
``faults=True`` the output also carries broken lines, duplicates and late events, so the
streaming pipelines can be tested on the messy parts as well as the happy path.
"""

from __future__ import annotations

import heapq
import math
import random
import sys
import time
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path

from tqdm import tqdm

from devtools.generators import Summary, prepare_folder, write_part

__all__ = [
    "DUPLICATE_MAX_DISTANCE",
    "LATE_MIN_AGE_SECONDS",
    "LOGGED_OUT",
    "RAMP_UP_SECONDS",
    "SITES",
    "START_DATE",
    "GenerationSummary",
    "generate_server_logs",
]

START_DATE = date(2019, 6, 20)
"""Day of the first event; event times are naive wall-clock times from its midnight."""

SITES = ("www.filpkart.tablet.com", "www.filpkart.mobile.com", "www.filpkart.desktop.com")
"""Values of ``Source`` for a logged-in customer."""

LOGGED_OUT = "LoggedOut"
"""``Source`` of the event with which a customer logs out."""

LATE_MIN_AGE_SECONDS = 600
"""A late event is at least this much older than the newest event written before it."""

DUPLICATE_MAX_DISTANCE = 20
"""A duplicate follows its original within this many lines, not counting late events."""

_FAULT_RATE = 0.01
_FAULT_KINDS = ("malformed", "missing_fields", "bad_timestamps", "duplicates", "late")
_EVENT_KINDS = ("add_to_cart", "product_view", "purchase")
_LATE_MAX_AGE_SECONDS = 1800
# Due distance is kept below DUPLICATE_MAX_DISTANCE: fault lines of the same step may push
# a duplicate a few lines further.
_DUPLICATE_DUE_MAX = 12

#: Customers start their first session within this many seconds of START_DATE (default).
RAMP_UP_SECONDS = 3600
_STEP_SECONDS = (2, 120)
# A session detector with a 5 minute inactivity gap must split sessions here.
_SESSION_GAP_SECONDS = (361, 3600)
_LOGOUT_SHARE = 0.3
_MEAN_SESSION_EVENTS = 7.0
_MAX_SESSION_EVENTS = 40
_FULL_CART = 8

_NOT_JSON = (
    "GET /cart HTTP/1.1 502",
    "<html><body>Bad Gateway</body></html>",
    "ERROR log shipper: connection reset by peer",
    "timestamp,CustomerId,EventType,Source",
)
_BAD_TIMESTAMPS = (
    "99:99:2019 25:61:61",
    "yesterday",
    "2019-06-20T00:46:01Z",
    "31:6:2019 10:4:5",
    "0:0:2019 0:0:0",
    "",
)


@dataclass(frozen=True)
class GenerationSummary(Summary):
    """What :func:`generate_server_logs` wrote; ``lines`` is the sum of all the line kinds.

    ``events`` counts valid on-time lines (neither duplicates nor late); ``by_type`` splits them.
    """

    files: int
    lines: int
    events: int
    malformed: int
    missing_fields: int
    bad_timestamps: int
    duplicates: int
    late: int
    by_type: dict[str, int] = field(default_factory=dict)


def generate_server_logs(
    out: str | Path,
    *,
    events: int,
    seed: int = 0,
    faults: bool = False,
    customers: int | None = None,
    ramp_up_seconds: int = RAMP_UP_SECONDS,
    lines_per_file: int = 10_000,
    progress: bool = False,
) -> GenerationSummary:
    """Write ``events`` valid server-log events (plus faults if asked) as ``out/part-NNNNN.json``.
    Customers start their first session within the first ``ramp_up_seconds``.

    The same arguments always give the same bytes. Raises FileExistsError if ``out`` is not empty.
    """
    n_customers = max(1, events // 100) if customers is None else customers
    _check_arguments(events, n_customers, lines_per_file, ramp_up_seconds)
    folder = prepare_folder(Path(out))
    rng = random.Random(seed)
    # Faults draw from their own generator so that, with or without them, customers make the
    # same events; faults=True only holds some back as late ones and adds the broken lines.
    fault_rng = random.Random(rng.getrandbits(64))
    stamps = _Stamps()
    catalog = _Catalog(rng, _catalog_size(n_customers))
    simulator = _Simulator(rng, n_customers, catalog, stamps, ramp_up_seconds)
    plan = _plan_faults(fault_rng, events) if faults else {}
    with tqdm(
        total=events, unit="event", desc="server logs", file=sys.stderr, disable=not progress
    ) as bar:
        output = _Output(folder, lines_per_file, bar)
        injector = _FaultInjector(fault_rng, catalog, stamps, n_customers, simulator, output)
        _run(simulator, injector, events, plan)
        output.close()
    return output.summary()


def _check_arguments(events: int, customers: int, lines_per_file: int, ramp_up: int) -> None:
    for name, value in (
        ("events", events),
        ("customers", customers),
        ("lines_per_file", lines_per_file),
    ):
        if value < 1:
            raise ValueError(f"{name} must be at least 1, got {value}")
    if ramp_up < 0:
        raise ValueError(f"ramp_up_seconds must not be negative, got {ramp_up}")


def _catalog_size(customers: int) -> int:
    return min(2000, max(50, customers))


def _plan_faults(rng: random.Random, events: int) -> dict[int, list[str]]:
    """Map an on-time event index to the faults injected right after that event."""
    count = min(events, max(1, round(events * _FAULT_RATE)))
    plan: dict[int, list[str]] = {}
    for kind in _FAULT_KINDS:
        spots = rng.sample(range(events), count)
        if kind == "late" and 0 not in spots:
            # The earliest event has the most time to fall behind, so at least one gets late.
            spots[0] = 0
        for spot in spots:
            plan.setdefault(spot, []).append(kind)
    return plan


def _run(
    simulator: _Simulator, injector: _FaultInjector, events: int, plan: dict[int, list[str]]
) -> None:
    for index in range(events):
        t, text, kind = simulator.next_event()
        injector.put(text, t, kind)
        kinds = plan.get(index)
        if kinds:
            injector.inject(kinds, text, t, first=index == 0)
    injector.finish()


class _Stamps:
    """Renders seconds since START_DATE as ``d:M:yyyy H:m:s`` in several paddings."""

    def __init__(self) -> None:
        self._dates: dict[int, tuple[str, str, str]] = {}
        # Many customers act within the same second, so the last second's texts are reused.
        self._last_t = -1
        self._last: list[str | None] = [None, None, None]

    def render(self, t: int, style: int) -> str:
        """Style 0 pads month, minute and second; 1 pads nothing; 2 pads everything."""
        if t != self._last_t:
            self._last_t = t
            self._last = [None, None, None]
        text = self._last[style]
        if text is None:
            text = self._last[style] = self._format(t, style)
        return text

    def _format(self, t: int, style: int) -> str:
        day, second_of_day = divmod(t, 86_400)
        dates = self._dates.get(day) or self._date(day)
        hour, rest = divmod(second_of_day, 3600)
        minute, second = divmod(rest, 60)
        if style == 0:
            return f"{dates[0]} {hour}:{minute:02d}:{second:02d}"
        if style == 1:
            return f"{dates[1]} {hour}:{minute}:{second}"
        return f"{dates[2]} {hour:02d}:{minute:02d}:{second:02d}"

    def _date(self, day: int) -> tuple[str, str, str]:
        d = START_DATE + timedelta(days=day)
        forms = (
            f"{d.day}:{d.month:02d}:{d.year}",
            f"{d.day}:{d.month}:{d.year}",
            f"{d.day:02d}:{d.month:02d}:{d.year}",
        )
        self._dates[day] = forms
        return forms


class _Catalog:
    """Products with fixed prices, pre-rendered as the JSON fragments the events need."""

    def __init__(self, rng: random.Random, size: int) -> None:
        self.size = size
        self.view: list[str] = []
        self.add: list[str] = []
        self.buy: list[str] = []
        for number in range(size):
            product = f"{100 + number}_PId"
            price = _draw_price(rng)
            amount = str(int(price)) if price.is_integer() else repr(price)
            self.view.append(f'{{"ProductView":{{"ProductId":"{product}","Price":{price!r}}}}}')
            self.add.append(f'{{"AddToCart":{{"ProductId":"{product}","Price":{price!r}}}}}')
            self.buy.append(f'{{"ProductId":"{product}","Price":"{amount}$","Quantity":')


def _draw_price(rng: random.Random) -> float:
    # Log-uniform between 1 and 1000: many cheap products, a few expensive ones.
    raw = math.exp(rng.uniform(0.0, math.log(1000.0)))
    if rng.random() < 0.25:
        return max(1.0, round(raw, 2))
    return float(max(1, round(raw)))


class _Customer:
    __slots__ = ("cart", "customer_id", "left", "preferred", "seen", "site")

    def __init__(self, customer_id: str, preferred: int) -> None:
        self.customer_id = customer_id
        self.preferred = preferred
        self.site = preferred
        self.left = 0
        self.cart: list[int] = []
        self.seen = -1


class _Simulator:
    """Interleaves all customers' sessions in event-time order (a heap of next event times)."""

    def __init__(
        self,
        rng: random.Random,
        customers: int,
        catalog: _Catalog,
        stamps: _Stamps,
        ramp_up_seconds: int,
    ) -> None:
        self._rng = rng
        self._random = rng.random
        self._catalog = catalog
        self._stamps = stamps
        self._customers = [self._new_customer(number) for number in range(customers)]
        self._queue = [(self._between(0, ramp_up_seconds), i) for i in range(customers)]
        heapq.heapify(self._queue)

    def next_event(self) -> tuple[int, str, str]:
        """Return (seconds since START_DATE, JSON line, event kind) of the next event."""
        t, number = self._queue[0]
        customer = self._customers[number]
        kind, payload = self._act(customer)
        customer.left -= 1
        if customer.left > 0:
            source = SITES[customer.site]
            following = t + self._between(*_STEP_SECONDS)
        else:
            logs_out = self._random() < _LOGOUT_SHARE
            source = LOGGED_OUT if logs_out else SITES[customer.site]
            following = t + self._between(*_SESSION_GAP_SECONDS)
            self._start_session(customer)
        heapq.heapreplace(self._queue, (following, number))
        stamp = self._stamps.render(t, self._style())
        line = (
            f'{{"timestamp":"{stamp}","CustomerId":"{customer.customer_id}",'
            f'"EventType":{payload},"Source":"{source}"}}'
        )
        return t, line, kind

    def _new_customer(self, number: int) -> _Customer:
        r = self._random()
        preferred = 1 if r < 0.5 else 2 if r < 0.8 else 0
        customer = _Customer(f"{1000 + number}_CId", preferred)
        self._start_session(customer)
        return customer

    def _start_session(self, customer: _Customer) -> None:
        length = 1 + int(-math.log(1.0 - self._random()) * _MEAN_SESSION_EVENTS)
        customer.left = min(length, _MAX_SESSION_EVENTS)
        if self._random() < 0.75:
            customer.site = customer.preferred
        else:
            customer.site = int(self._random() * len(SITES))

    def _act(self, customer: _Customer) -> tuple[str, str]:
        r = self._random()
        cart = customer.cart
        if not cart:
            if r < 0.62:
                return self._view(customer)
            return self._add(customer) if r < 0.98 else self._buy_now()
        if r < 0.45:
            return self._view(customer)
        if r < (0.75 if len(cart) < _FULL_CART else 0.55):
            return self._add(customer)
        return self._checkout(cart)

    def _view(self, customer: _Customer) -> tuple[str, str]:
        product = self._popular()
        customer.seen = product
        return "product_view", self._catalog.view[product]

    def _add(self, customer: _Customer) -> tuple[str, str]:
        seen = customer.seen
        product = seen if seen >= 0 and self._random() < 0.65 else self._popular()
        if product not in customer.cart:
            customer.cart.append(product)
        return "add_to_cart", self._catalog.add[product]

    def _checkout(self, cart: list[int]) -> tuple[str, str]:
        count = min(len(cart), 1 + int(self._random() * 3))
        bought = self._rng.sample(cart, count)
        for product in bought:
            cart.remove(product)
        if count < 3 and self._random() < 0.1:
            impulse = self._popular()
            if impulse not in bought:
                bought.append(impulse)
        return "purchase", self._purchase(bought)

    def _buy_now(self) -> tuple[str, str]:
        return "purchase", self._purchase([self._popular()])

    def _purchase(self, products: list[int]) -> str:
        buy = self._catalog.buy
        items = ",".join(f"{buy[product]}{self._quantity()}}}" for product in products)
        return f'{{"Purchase":[{items}]}}'

    def _quantity(self) -> int:
        r = self._random()
        return 1 if r < 0.6 else 2 if r < 0.85 else 3 + int(self._random() * 3)

    def _popular(self) -> int:
        # Squaring skews picks to low product numbers: a few best sellers, a long tail.
        return int(self._random() ** 2 * self._catalog.size)

    def _style(self) -> int:
        r = self._random()
        return 0 if r < 0.5 else 1 if r < 0.85 else 2

    def _between(self, low: int, high: int) -> int:
        return low + int(self._random() * (high - low + 1))


class _Output:
    """Cuts the line stream into part files; each new file opens with the due late events."""

    def __init__(self, folder: Path, lines_per_file: int, bar: tqdm) -> None:
        self._folder = folder
        self._per_file = lines_per_file
        # Late events go first in a file, but a file must keep room for the ordinary stream.
        self._late_room = min(lines_per_file // 2, lines_per_file - 1)
        self._bar = bar
        self._buffer: list[str] = []
        self._counts = dict.fromkeys(_EVENT_KINDS + _FAULT_KINDS, 0)
        self._reported = 0
        self._held: list[tuple[int, str]] = []
        self._files = 0
        # File times start a day back, one second apart, so they are distinct and in the past.
        self._started_ns = time.time_ns() - 86_400 * 1_000_000_000
        self._newest = -1
        # Newest event time written up to the end of each file.
        self._newest_by_file: list[int] = []

    def add(self, text: str, t: int | None, kind: str) -> None:
        """Append one line; ``t`` is its event time or None if the line has none."""
        if not self._buffer and self._files and self._held:
            self._release_late()
        self._buffer.append(text)
        self._counts[kind] += 1
        if t is not None and t > self._newest:
            self._newest = t
        if len(self._buffer) >= self._per_file:
            self._flush()

    def hold(self, release_at: int, text: str) -> None:
        """Keep a late event until the newest written time reaches ``release_at``."""
        self._held.append((release_at, text))

    def close(self) -> None:
        """Write the last, shorter file; held events never due are dropped."""
        if self._buffer:
            self._flush()
        self._report()

    def summary(self) -> GenerationSummary:
        """Counts of what was written."""
        counts = self._counts
        by_type = {kind: counts[kind] for kind in _EVENT_KINDS}
        faults = {kind: counts[kind] for kind in _FAULT_KINDS}
        return GenerationSummary(
            files=self._files,
            lines=sum(counts.values()),
            events=sum(by_type.values()),
            by_type=by_type,
            **faults,
        )

    def _release_late(self) -> None:
        # Only times written two files back count, so that a reader taking one file per batch
        # drops the event as late whether it judges late rows by the current batch's watermark
        # or, as Spark does by default, by the previous batch's.
        if len(self._newest_by_file) < 2:
            return
        newest = self._newest_by_file[-2]
        due: list[str] = []
        kept: list[tuple[int, str]] = []
        for release_at, text in self._held:
            if release_at <= newest and len(due) < self._late_room:
                due.append(text)
            else:
                kept.append((release_at, text))
        self._held = kept
        self._buffer.extend(due)
        self._counts["late"] += len(due)

    def _flush(self) -> None:
        write_part(self._folder, self._files, self._buffer, self._started_ns)
        self._newest_by_file.append(self._newest)
        self._files += 1
        self._buffer = []
        self._report()

    def _report(self) -> None:
        done = sum(self._counts[kind] for kind in _EVENT_KINDS)
        self._bar.update(done - self._reported)
        self._reported = done


class _FaultInjector:
    """Feeds lines to the output, adding broken lines, duplicates and late events on request."""

    def __init__(
        self,
        rng: random.Random,
        catalog: _Catalog,
        stamps: _Stamps,
        customers: int,
        simulator: _Simulator,
        output: _Output,
    ) -> None:
        self._rng = rng
        self._catalog = catalog
        self._stamps = stamps
        self._customers = customers
        self._simulator = simulator
        self._output = output
        self._pending: list[tuple[int, int, str, int]] = []
        self._written = 0

    def put(self, text: str, t: int | None, kind: str) -> None:
        """Write a line, then any duplicates that have become due."""
        self._output.add(text, t, kind)
        self._written += 1
        pending = self._pending
        while pending and pending[0][0] <= self._written:
            _, _, copy, copy_t = heapq.heappop(pending)
            self._output.add(copy, copy_t, "duplicates")
            self._written += 1

    def inject(self, kinds: list[str], text: str, t: int, *, first: bool) -> None:
        """Add the faults planned after the valid event ``text`` at time ``t``."""
        for kind in kinds:
            if kind == "duplicates":
                due = self._written + 1 + int(self._rng.random() * _DUPLICATE_DUE_MAX)
                heapq.heappush(self._pending, (due, self._written, text, t))
            elif kind == "late":
                self._hold_next_event(first)
            elif kind == "malformed":
                self.put(self._malformed(t), None, kind)
            elif kind == "missing_fields":
                self.put(self._without_customer(t), t, kind)
            else:
                self.put(self._bad_timestamp(), None, kind)

    def finish(self) -> None:
        """Write duplicates still waiting when the stream ends."""
        while self._pending:
            _, _, copy, copy_t = heapq.heappop(self._pending)
            self._output.add(copy, copy_t, "duplicates")
            self._written += 1

    def _hold_next_event(self, first: bool) -> None:
        # The event is taken out of the on-time stream: written only later, it is never a copy.
        t, text, _ = self._simulator.next_event()
        age = LATE_MIN_AGE_SECONDS
        if not first:
            age += int(self._rng.random() * (_LATE_MAX_AGE_SECONDS - LATE_MIN_AGE_SECONDS + 1))
        self._output.hold(t + age, text)

    def _malformed(self, t: int) -> str:
        r = self._rng.random()
        if r < 0.5:
            line = self._line(self._stamps.render(t, 0), self._customer_field())
            # Any proper prefix of a JSON object is invalid: a write cut short.
            return line[: len(line) // 3 + int(self._rng.random() * (len(line) * 2 // 3 - 1))]
        if r < 0.8:
            return self._rng.choice(_NOT_JSON)
        return "{}"

    def _without_customer(self, t: int) -> str:
        return self._line(self._stamps.render(t, 0), "")

    def _bad_timestamp(self) -> str:
        return self._line(self._rng.choice(_BAD_TIMESTAMPS), self._customer_field())

    def _customer_field(self) -> str:
        number = int(self._rng.random() * self._customers)
        return f'"CustomerId":"{1000 + number}_CId",'

    def _line(self, stamp: str, customer_field: str) -> str:
        product = int(self._rng.random() * self._catalog.size)
        payload = (self._catalog.view if self._rng.random() < 0.6 else self._catalog.add)[product]
        site = self._rng.choice(SITES)
        return f'{{"timestamp":"{stamp}",{customer_field}"EventType":{payload},"Source":"{site}"}}'
