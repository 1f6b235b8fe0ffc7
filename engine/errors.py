"""Errors a user can cause: printed as one line, exit code 2."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = ["KafkaUnavailable", "UserError", "closest", "did_you_mean", "first_line"]


class UserError(Exception):
    """A problem with the user's input, files, options or tables; shown without a stack trace."""


class KafkaUnavailable(UserError):
    """The Kafka broker did not answer in time: transient, so a continuous run retries."""

    @classmethod
    def broker(cls, servers: str, why: str) -> KafkaUnavailable:
        """The one line for a broker that does not answer, naming it and the setting."""
        return cls(f"kafka broker {servers} unreachable (kafka.bootstrap.servers): {why}")


def closest(name: str, names: Iterable[str], *, cutoff: float = 0.8) -> str | None:
    """The one of `names` a misspelt `name` most likely meant, for a "did you mean" (difflib's
    similarity at least `cutoff`); None when none is close."""
    close = difflib.get_close_matches(name, sorted(names), n=1, cutoff=cutoff)
    return close[0] if close else None


def did_you_mean(name: str, names: Iterable[str], *, cutoff: float = 0.8) -> str:
    """` (did you mean X?)` for the close one of `names`, to end a message with; else ""."""
    close = closest(name, names, cutoff=cutoff)
    return f" (did you mean {close}?)" if close else ""


def first_line(err: BaseException | str) -> str:
    """The first line of an error's message (or of a text), or the error's type's name when
    it has none."""
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__
