"""Errors a user can cause: printed as one line, exit code 2."""

from __future__ import annotations

__all__ = ["KafkaUnavailable", "UserError", "first_line"]


class UserError(Exception):
    """A problem with the user's input, files, options or tables; shown without a stack trace."""


class KafkaUnavailable(UserError):
    """The Kafka broker did not answer in time: transient, so a continuous run retries."""

    @classmethod
    def broker(cls, servers: str, why: str) -> KafkaUnavailable:
        """The one line for a broker that does not answer, naming it and the setting."""
        return cls(f"kafka broker {servers} unreachable (kafka.bootstrap.servers): {why}")


def first_line(err: BaseException | str) -> str:
    """The first line of an error's message (or of a text), or the error's type's name when
    it has none."""
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__
