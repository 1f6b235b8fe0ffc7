"""Errors a user can cause: printed as one line, exit code 2."""

from __future__ import annotations

__all__ = ["KafkaUnavailable", "UserError"]


class UserError(Exception):
    """A problem with the user's input, files, options or tables; shown without a stack trace."""


class KafkaUnavailable(UserError):
    """The Kafka broker did not answer in time: transient, so a continuous run retries."""
