"""A handler as a project of one's own writes it, in its own `handlers/` folder: running
totals per currency, with a NamedTuple as its state."""

from __future__ import annotations

from functools import cached_property
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
        amounts = events[self._amounts]
        total = Total(was.amount + sum(amounts), was.records + len(amounts))
        return Step(state=total, outputs=[(key[0], *total)])

    @cached_property
    def _amounts(self) -> str:
        # Worked out once per handler, as the bundled handlers do with their settings.
        return self.columns[0]
