"""The conditions of a view's expectations: columns of its view, deterministic DROP ROW rules."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import sqlglot
from sqlglot import exp

from engine.definitions.sql import SparkStreaming, SqlStep
from engine.lint.functions import call_name
from engine.lint.streaming import NONDETERMINISTIC
from engine.plan.findings import Finding

__all__ = ["check_expectations"]

#: The current time, which a batch sees as its streaming part does (pin_batch_time).
_PINNED_TIME = frozenset({"current_timestamp", "now", "current_date"})


def check_expectations(
    steps: Sequence[SqlStep], views: Mapping[str, list[str] | None]
) -> list[Finding]:
    """Unknown columns in the conditions of expectations: a condition reads its own view's
    columns (or a lambda's variables, or fields of those). A DROP ROW rule must be
    deterministic: the view and the rows it drops are judged apart, and must agree."""
    findings: list[Finding] = []
    for step in steps:
        for rule in step.expectations:
            if rule.action != "drop":
                continue
            condition = sqlglot.parse_one(rule.condition, read=SparkStreaming)
            for func in condition.find_all(exp.Func):
                name = call_name(func)
                if name in NONDETERMINISTIC - _PINNED_TIME:
                    message = (
                        f"expectation {rule.name}: non-deterministic {name}() in a DROP ROW rule; "
                        "the rows the view drops and those sent to quarantine could differ"
                    )
                    findings.append(
                        Finding(step.path, rule.line, None, "nondeterministic-rule", message)
                    )
        columns = views.get(step.name)
        if not step.expectations or columns is None:
            continue
        known = {c.lower() for c in columns}
        for rule in step.expectations:
            condition = sqlglot.parse_one(rule.condition, read=SparkStreaming)
            variables = {
                v.name.lower() for lam in condition.find_all(exp.Lambda) for v in lam.expressions
            }
            for column in condition.find_all(exp.Column):
                root = column.parts[0].name.lower()  # a struct field's column
                if root not in known and root not in variables:
                    message = (
                        f"expectation {rule.name}: unknown column '{column.sql()}' of view "
                        f"'{step.name}'"
                    )
                    findings.append(Finding(step.path, rule.line, None, "unknown-column", message))
    return findings
