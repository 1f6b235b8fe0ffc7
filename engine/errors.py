"""Errors a user can cause: printed as one line, exit code 2."""

from __future__ import annotations

__all__ = ["UserError"]


class UserError(Exception):
    """A problem with the user's input, files, options or tables; shown without a stack trace."""
