"""Settings checked before Spark starts (engine/runtime/cluster.py), without Spark."""

from __future__ import annotations

import pytest

from engine.errors import UserError
from engine.runtime.cluster import executor_wait_s

WAIT = "spark.scheduler.maxRegisteredResourcesWaitingTime"


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        (None, 60.0),  # not set: a run waits a minute for its first executor
        ("5s", 5.0),
        ("90", 0.09),  # Spark's unit for this setting: milliseconds
        ("1500ms", 1.5),
        ("2min", 120.0),
        ("2m", 120.0),
        (" 1H ", 3600.0),
    ],
)
def test_executor_wait_reads_spark_time_strings(value: str | None, seconds: float) -> None:
    settings = {} if value is None else {WAIT: value}
    assert executor_wait_s(settings) == pytest.approx(seconds)


@pytest.mark.parametrize("value", ["soon", "1.5s", "-5s", "5 s", "5 seconds", ""])
def test_executor_wait_in_another_form_names_the_setting(value: str) -> None:
    with pytest.raises(UserError, match=rf"^--conf {WAIT}={value}: expected a time such as 60s"):
        executor_wait_s({WAIT: value})
