"""Runs any `handlers.base.StateHandler` in Spark with applyInPandasWithState."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pandas as pd
from pyspark.accumulators import Accumulator, AccumulatorParam
from pyspark.sql import DataFrame
from pyspark.sql.streaming.state import GroupState, GroupStateTimeout
from pyspark.sql.types import DataType

from handlers.base import StateHandler, Step

__all__ = ["CountsParam", "apply_handler"]

_TIMEOUTS = {
    "none": GroupStateTimeout.NoTimeout,
    "event_time": GroupStateTimeout.EventTimeTimeout,
    "processing_time": GroupStateTimeout.ProcessingTimeTimeout,
}


def _events(handler: StateHandler, frames: Iterator[pd.DataFrame]) -> list[dict[str, Any]]:
    chunks = list(frames)
    batch = chunks[0] if len(chunks) == 1 else pd.concat(chunks, ignore_index=True)
    if handler.order_by:
        batch = batch.sort_values(list(handler.order_by), kind="stable")
    return batch.to_dict("records")


def _store(handler: StateHandler, state: GroupState, step: Step) -> None:
    if step.state is None:
        state.remove()
        return
    state.update(handler.state_to_row(step.state))
    mode = handler.timeout_mode
    if mode == "event_time" and step.timer_us is not None:
        # Spark refuses a timer behind the watermark; such a timer is due now anyway.
        watermark_ms = state.getCurrentWatermarkMs()
        state.setTimeoutTimestamp(max(step.timer_us // 1000, watermark_ms + 1))
    elif mode == "processing_time" and handler.timeout is not None:
        state.setTimeoutDuration(int(handler.timeout.total_seconds() * 1000))


class CountsParam(AccumulatorParam):
    """Sums `Step.counts` from the Python workers into one Counter on the driver."""

    def zero(self, value: Counter[str]) -> Counter[str]:
        return Counter()

    def addInPlace(self, value1: Counter[str], value2: Counter[str]) -> Counter[str]:
        value1.update(value2)
        return value1


def apply_handler(
    df: DataFrame, handler: StateHandler, *, counts: Accumulator | None = None
) -> DataFrame:
    """Group `df` by the handler's key and run it, keeping its state in Spark's state store;
    `counts` (a CountsParam accumulator) receives the handler's `Step.counts`."""
    columns = DataType.fromDDL(handler.output_schema).fieldNames()

    def run(key: tuple[Any, ...], frames: Iterator[pd.DataFrame], state: GroupState):
        previous = handler.state_from_row(state.get) if state.exists else None
        if state.hasTimedOut:
            step = handler.expire(key, previous)
        else:
            step = handler.update(key, previous, _events(handler, frames))
        _store(handler, state, step)
        if counts is not None and step.counts:
            counts.add(Counter(step.counts))
        if step.outputs:
            yield pd.DataFrame(list(step.outputs), columns=columns)

    # Only the columns the handler reads cross to Python: Arrow conversion is most of the cost.
    narrow = df.select(*handler.key, *handler.columns)
    return narrow.groupBy(*handler.key).applyInPandasWithState(
        run,
        outputStructType=handler.output_schema,
        stateStructType=handler.state_schema,
        outputMode="append",
        timeoutConf=_TIMEOUTS[handler.timeout_mode],
    )
