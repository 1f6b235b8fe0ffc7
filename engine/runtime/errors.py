"""Spark's errors as the one line a user sees: ours when our code raised in a worker."""

from __future__ import annotations

import re

from engine.errors import KafkaUnavailable, UserError, first_line

__all__ = ["as_user_error", "spark_error_line"]


# Our own errors raised in Spark's Python workers reach the driver inside Spark's message.
_OWN_ERROR = re.compile(r"\b(UserError|KafkaUnavailable): (.+)")
_SQLSTATE = re.compile(r"\s*SQLSTATE: \w+\s*$")
# An error in a foreachBatch function reaches the query as Spark's wrapper around the Python
# traceback: the error is the traceback's last line, with Spark's SQL context after it.
_PYTHON_PROXY = "An exception was raised by the Python Proxy"
_RAISED = re.compile(
    r"^[\w.]*(?:Exception|Error): (.+)$(?:\n== SQL.*==$)?(?:\n(\.\.\..*\.\.\.)$)?", re.M
)


def spark_error_line(err: Exception) -> str:
    """The first meaningful line of a Spark error, without the JVM stack trace."""
    text = str(getattr(err, "getMessage", lambda: "")() or err).strip()
    own = _OWN_ERROR.search(text)
    if own:
        # raise_error() in SQL (a FAIL UPDATE expectation) ends the line with Spark's state.
        return _SQLSTATE.sub("", own.group(2)).strip()
    raised = _RAISED.findall(text.split(_PYTHON_PROXY, 1)[1]) if _PYTHON_PROXY in text else []
    if raised:
        message, context = raised[-1]
        message = _SQLSTATE.sub("", message).strip()
        return f"{message} (in SQL {context})" if context else message
    return first_line(text) if text else type(err).__name__


def as_user_error(err: Exception, prefix: str = "") -> Exception:
    """The error to raise for a failed Spark job: ours (UserError, KafkaUnavailable) when it
    came from our code in a worker, else a RuntimeError; both as one line after `prefix`."""
    text = str(getattr(err, "getMessage", lambda: "")() or err)
    own = _OWN_ERROR.search(text)
    kind = {"UserError": UserError, "KafkaUnavailable": KafkaUnavailable}.get(
        own.group(1) if own else "", RuntimeError
    )
    return kind(prefix + spark_error_line(err))
