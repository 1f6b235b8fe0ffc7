"""Customer carts: AddToCart adds a line, Purchase removes one line per product bought."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from functools import cached_property
from typing import Any, ClassVar, NamedTuple

from engine.definitions.handler import Columns, StateHandler, Step, TimeoutMode

__all__ = ["CartHandler", "CartRow", "CartState"]


@dataclass(frozen=True)
class CartState:
    """A customer's cart lines (product_id, price), oldest first."""

    products: tuple[tuple[str, float], ...]
    updated_us: int


class CartRow(NamedTuple):
    """A row of `CartHandler.output_schema`; `products` as (product_id, price) tuples."""

    customer_id: str
    total_items: int
    total_price: float
    products: list[tuple[str, float]]
    updated_at: int


class CartHandler(StateHandler[CartState]):
    """Keeps each cart across logouts and session timeouts; `cart_ttl` optionally empties it.
    Reads every event item; only add_to_cart and purchase rows change the cart."""

    key = ("customer_id",)
    columns = ("event_time", "event_type", "product_id", "price")
    # Stable: the items of one Purchase line (same time) keep their order.
    order_by = ("event_time",)
    state_type = CartState
    # Lines are stored as JSON text: pyspark 4.3's applyInPandasWithState fails to read array
    # types in a state schema (KeyError 'elementType' in the Python worker).
    state_schema = "products_json STRING, updated_us BIGINT"
    output_schema = (
        "customer_id STRING, total_items BIGINT, total_price DOUBLE, "
        "products ARRAY<STRUCT<product_id: STRING, price: DOUBLE>>, updated_at TIMESTAMP"
    )
    defaults: ClassVar[dict[str, str]] = {"cart_ttl": "none"}

    @property
    def ttl(self) -> timedelta | None:
        """Event time after the last change at which a cart is emptied; None keeps it forever."""
        text = self.settings["cart_ttl"]
        return None if text.lower() in ("", "none") else self.duration_setting("cart_ttl")

    @property
    def timeout_mode(self) -> TimeoutMode:
        return "none" if self.ttl is None else "event_time"

    def update(
        self, key: tuple[Any, ...], state: CartState | None, events: Columns
    ) -> Step[CartState]:
        """Apply a customer's events in time order. With `cart_ttl`, an event more than the TTL
        after the cart's last change finds it emptied first, as the timer would have left it:
        Spark calls no timeout for a key with rows in the batch, so the rule is checked here."""
        ttl_us = self._ttl_us
        lines = list(state.products) if state else []
        updated = state.updated_us if state else 0
        has_cart = state is not None
        changed = False
        # The cart as the TTL left it, when it expired in these events and nothing came after.
        emptied: CartState | None = None
        for t, kind, product, price in zip(
            events["event_time"],
            events["event_type"],
            events["product_id"],
            events["price"],
            strict=True,
        ):
            # Strictly more than the TTL, as the timer (deadline < watermark) and sessions'
            # gap decide. Any event counts, a view too: the customer's own time is past the
            # deadline. `updated` is the newest change so far, so an event older than it (out
            # of order across batches; within a batch events come in time order) never does.
            if has_cart and ttl_us is not None and t - updated > ttl_us:
                emptied = CartState(products=(), updated_us=updated + ttl_us)
                lines, updated, has_cart, changed = [], 0, False, False
            if kind == "add_to_cart":
                lines.append((product, float(price)))
            elif kind == "purchase":
                index = next((i for i, line in enumerate(lines) if line[0] == product), None)
                if index is not None:
                    del lines[index]
            else:
                continue  # product views and other kinds leave the cart alone
            changed = has_cart = True
            if t > updated:
                updated = t
        if not changed:
            if emptied is not None:
                # What `expire` writes: the empty cart at its deadline, no state kept. One row
                # per customer and batch (the table is merged by customer): a cart made after
                # the emptying is written instead, as it would replace the empty row anyway.
                return Step(state=None, outputs=[self._row(key, emptied)])
            # Not even a first cart: a customer who only viewed products has none.
            return Step(state=state, timer_us=self._deadline(state))
        new = CartState(products=tuple(lines), updated_us=updated)
        if new == state:
            return Step(state=state, timer_us=self._deadline(state))
        return Step(state=new, outputs=[self._row(key, new)], timer_us=self._deadline(new))

    def expire(self, key: tuple[Any, ...], state: CartState) -> Step[CartState]:
        emptied = CartState(products=(), updated_us=self._deadline(state) or state.updated_us)
        return Step(state=None, outputs=[self._row(key, emptied)])

    def state_from_row(self, row: Sequence[Any]) -> CartState:
        products_json, updated = row
        lines = json.loads(products_json)
        return CartState(
            products=tuple((p, float(price)) for p, price in lines), updated_us=updated
        )

    def state_to_row(self, state: CartState) -> tuple[Any, ...]:
        return (json.dumps(state.products), state.updated_us)

    @cached_property
    def _ttl_us(self) -> int | None:
        # Parsed once per handler, not once per key.
        ttl = self.ttl
        return None if ttl is None else int(ttl / timedelta(microseconds=1))

    def _deadline(self, state: CartState | None) -> int | None:
        if state is None or self._ttl_us is None:
            return None
        return state.updated_us + self._ttl_us

    @staticmethod
    def _row(key: tuple[Any, ...], state: CartState) -> CartRow:
        return CartRow(
            customer_id=key[0],
            total_items=len(state.products),
            total_price=float(sum(price for _, price in state.products)),
            products=list(state.products),
            updated_at=state.updated_us,
        )
