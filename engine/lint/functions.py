"""Calls to names that are none of Spark's built-in functions."""

from __future__ import annotations

from collections.abc import Sequence

import sqlglot
from sqlglot import exp

from engine.definitions.spark_functions import not_a_function, spark_functions
from engine.definitions.sql import SparkStreaming, SqlStep
from engine.plan.findings import Finding, finding_at

__all__ = ["call_name", "check_function_names"]


def call_name(node: exp.Func) -> str:
    """A call's function name as Spark spells it, lower-case (`date_trunc`, `rand`)."""
    return (node.name if isinstance(node, exp.Anonymous) else node.sql_name()).lower()


def check_function_names(steps: Sequence[SqlStep]) -> list[Finding]:
    """Calls to a name that is none of Spark's built-ins (a misspelt `date_trun`), in a view or
    an expectation's condition: Spark stops the run there when it analyses the view; the close
    built-in is named where there is one. sqlglot builds the functions it knows as classes, so
    only other names are looked up."""
    known = spark_functions()
    findings: list[Finding] = []
    for step in steps:
        for call in _unknown_calls(step.tree):
            message = not_a_function(call.name, known)
            findings.append(finding_at(step.path, call, "unknown-function", message))
        for rule in step.expectations:
            condition = sqlglot.parse_one(rule.condition, read=SparkStreaming)
            for call in _unknown_calls(condition):
                message = f"expectation {rule.name}: {not_a_function(call.name, known)}"
                findings.append(Finding(step.path, rule.line, None, "unknown-function", message))
    return findings


def _unknown_calls(tree: exp.Expression) -> list[exp.Func]:
    known = spark_functions()
    return [
        call
        for call in tree.find_all(exp.Anonymous, exp.AnonymousAggFunc)
        if call.name.lower() not in known and not isinstance(call.parent, exp.Dot)
    ]
