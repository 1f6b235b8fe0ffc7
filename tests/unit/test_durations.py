"""The one duration parser: a table of what users write and what it means."""

import pytest

from engine.definitions.durations import parse_duration


@pytest.mark.parametrize(
    ("text", "shown", "micros", "interval"),
    [
        ("5 minutes", "5 minutes", 300_000_000, "INTERVAL '5' MINUTE"),
        ("1 minute", "1 minute", 60_000_000, "INTERVAL '1' MINUTE"),
        ("30 s", "30 seconds", 30_000_000, "INTERVAL '30' SECOND"),
        ("250ms", "250 milliseconds", 250_000, "INTERVAL '0.25' SECOND"),
        ("2 h", "2 hours", 7_200_000_000, "INTERVAL '2' HOUR"),
        ("1.5 hours", "1.5 hours", 5_400_000_000, "INTERVAL '5400' SECOND"),
        ("INTERVAL 2 MINUTES", "2 minutes", 120_000_000, "INTERVAL '2' MINUTE"),
        ("INTERVAL '1' MINUTE", "1 minute", 60_000_000, "INTERVAL '1' MINUTE"),
        ("1 week", "1 week", 604_800_000_000, "INTERVAL '604800' SECOND"),
    ],
)
def test_parse_duration(text: str, shown: str, micros: int, interval: str) -> None:
    duration = parse_duration(text)
    assert (str(duration), duration.micros, duration.interval_sql()) == (shown, micros, interval)


@pytest.mark.parametrize("text", ["", "5", "minutes", "2 fortnights", "-1 minute", "soon"])
def test_not_a_duration(text: str) -> None:
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration(text)


@pytest.mark.parametrize("text", ["36501 days", "99999999999 days", "6000 weeks"])
def test_too_long_a_duration(text: str) -> None:
    with pytest.raises(ValueError, match="too long a duration"):
        parse_duration(text)
