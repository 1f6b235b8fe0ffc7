"""Customer carts: AddToCart adds a line, Purchase removes one line per product bought."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, ClassVar

from handlers.base import Event, StateHandler, Step, TimeoutMode, from_us, parse_duration, to_us

__all__ = ["CartHandler", "CartState"]


@dataclass(frozen=True)
class CartState:
    """A customer's cart lines (product_id, price), oldest first."""

    products: tuple[tuple[str, float], ...]
    updated_us: int


class CartHandler(StateHandler[CartState]):
    """Keeps each cart across logouts and session timeouts; `cart_ttl` optionally empties it."""

    key = ("customer_id",)
    columns = ("event_time", "event_type", "product_id", "price")
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
        return None if text.lower() in ("", "none") else parse_duration(text)

    @property
    def timeout_mode(self) -> TimeoutMode:
        return "none" if self.ttl is None else "event_time"

    def update(
        self, key: tuple[Any, ...], state: CartState | None, events: Sequence[Event]
    ) -> Step[CartState]:
        lines = list(state.products) if state else []
        updated = state.updated_us if state else 0
        for event in events:
            kind, product = event["event_type"], event["product_id"]
            if kind == "add_to_cart":
                lines.append((product, float(event["price"])))
            elif kind == "purchase":
                index = next((i for i, line in enumerate(lines) if line[0] == product), None)
                if index is not None:
                    del lines[index]
            else:
                continue
            updated = max(updated, to_us(event["event_time"]))
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

    def _deadline(self, state: CartState | None) -> int | None:
        if state is None or self.ttl is None:
            return None
        return state.updated_us + int(self.ttl / timedelta(microseconds=1))

    @staticmethod
    def _row(key: tuple[Any, ...], state: CartState) -> dict[str, Any]:
        return {
            "customer_id": key[0],
            "total_items": len(state.products),
            "total_price": float(sum(price for _, price in state.products)),
            "products": [{"product_id": p, "price": price} for p, price in state.products],
            "updated_at": from_us(state.updated_us),
        }
