"""Durations as users write them ('5 minutes', '30 s', `INTERVAL '1' MINUTE`): one parser for
handler settings, watermark delays, triggers, `window()` literals and graph labels."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import timedelta

__all__ = ["Duration", "parse_duration"]

#: Accepted unit spellings (lower case, without a plural s) -> the unit's name.
_UNITS = {
    "us": "microsecond",
    "microsecond": "microsecond",
    "ms": "millisecond",
    "millisecond": "millisecond",
    "s": "second",
    "sec": "second",
    "second": "second",
    "m": "minute",
    "min": "minute",
    "minute": "minute",
    "h": "hour",
    "hour": "hour",
    "d": "day",
    "day": "day",
    "w": "week",
    "week": "week",
}
_MICROS = {
    "microsecond": 1,
    "millisecond": 1_000,
    "second": 1_000_000,
    "minute": 60_000_000,
    "hour": 3_600_000_000,
    "day": 86_400_000_000,
    "week": 604_800_000_000,
}
_LONGEST = 36_500 * _MICROS["day"]
_FORM = re.compile(r"\s*(?:interval\s+)?'?\s*(\d+(?:\.\d+)?)\s*'?\s*([a-z]+)\s*'?\s*")


@dataclass(frozen=True)
class Duration:
    """An amount of one unit, as written (`1.5 minute`)."""

    amount: float
    unit: str

    @property
    def micros(self) -> int:
        """The duration in microseconds."""
        return round(self.amount * _MICROS[self.unit])

    @property
    def timedelta(self) -> timedelta:
        """The duration as a `datetime.timedelta`."""
        return timedelta(microseconds=self.micros)

    @property
    def number(self) -> str:
        """The amount without a needless `.0`."""
        return f"{self.amount:g}"

    def __str__(self) -> str:
        """The form users write in settings: `1 minute`, `5 seconds`."""
        return f"{self.number} {self.unit}{'' if self.amount == 1 else 's'}"

    @property
    def trigger_text(self) -> str:
        """The form Spark's triggers parse, in whole milliseconds: they take neither a fraction
        (`1.5 hours`) nor a short unit (`30 s`, `5 secs`), which `parse_duration` reads."""
        return f"{self.micros // 1000} milliseconds"

    def interval_sql(self) -> str:
        """A Spark and DuckDB interval literal: the unit kept where both read it and the amount
        is whole, else seconds."""
        if self.amount.is_integer() and self.unit in ("second", "minute", "hour", "day"):
            return f"INTERVAL '{self.number}' {self.unit.upper()}"
        return f"INTERVAL '{self.micros / 1_000_000:g}' SECOND"


def parse_duration(text: str) -> Duration:
    """Parse '5 minutes', '30 s', '1.5 hours', `INTERVAL 2 MINUTES`, `INTERVAL '1' MINUTE`;
    ValueError on anything else."""
    match = _FORM.fullmatch(text.lower())
    word = match.group(2) if match else ""
    unit = _UNITS.get(word) or (_UNITS.get(word[:-1]) if word.endswith("s") else None)
    if match is None or unit is None:
        raise ValueError(f"not a duration: {text!r} (expected e.g. '5 minutes')")
    duration = Duration(float(match.group(1)), unit)
    if duration.micros > _LONGEST:
        # Past this a timedelta or Spark's interval overflows; no timeout or delay needs it.
        raise ValueError(f"too long a duration: {text!r} (at most 36500 days)")
    return duration
