"""A handler as a project of one's own writes it, in its own `handlers/` folder: running
totals per currency, with a NamedTuple as its state."""

from __future__ import annotations

from typing import Any, NamedTuple

from engine.definitions.handler import Columns, StateHandler, Step


class Total(NamedTuple):
    amount: float
    records: int


class RunningTotal(StateHandler[Total]):
    """Adds each batch's amounts to the currency's total and emits the new total."""

    key = ("currency",)
    columns = ("amount",)
    state_type = Total
    state_schema = "amount DOUBLE, records BIGINT"
    output_schema = "currency STRING, amount DOUBLE, records BIGINT"

    def update(self, key: tuple[Any, ...], state: Total | None, events: Columns) -> Step[Total]:
        was = state or Total(0.0, 0)
        total = Total(was.amount + sum(events["amount"]), was.records + len(events["amount"]))
        return Step(state=total, outputs=[(key[0], *total)])
