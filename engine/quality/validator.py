"""Great Expectations runs a table's suite over its rows, and writes Data Docs for them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from engine.definitions.suites import FINITE_SUFFIX
from engine.errors import UserError
from engine.quality.report import Outcome, jsonable
from engine.quality.suites import Suite

__all__ = ["Validator"]

_DOCS_SITE = "quality"
_COLUMN_ARGS = ("column", "column_A", "column_B", "column_list")


def _label(config: Any) -> str:
    kwargs = config.kwargs
    cols: list[str] = []
    for arg in _COLUMN_ARGS:
        value = kwargs.get(arg)
        cols.extend(value if isinstance(value, list) else [value] if value else [])
    return f"{config.type}({', '.join(cols)})"


class Validator:
    """An ephemeral GX context (nothing written to the project) whose Data Docs go to a folder."""

    def __init__(self, docs_dir: Path) -> None:
        import great_expectations as gx
        from great_expectations.data_context.types.base import ProgressBarsConfig

        self._gx = gx
        self.context = gx.get_context(mode="ephemeral")
        self.context.enable_analytics(False)
        self.context.variables.progress_bars = ProgressBarsConfig(globally=False)
        # The ephemeral context's default site lives in a temp folder; only ours is wanted.
        for site in list(self.context.list_data_docs_sites()):
            self.context.delete_data_docs_site(site)
        self.context.add_data_docs_site(
            _DOCS_SITE,
            {
                "class_name": "SiteBuilder",
                "store_backend": {
                    "class_name": "TupleFilesystemStoreBackend",
                    "base_directory": str(docs_dir),
                },
                "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
            },
        )
        self.source = self.context.data_sources.add_pandas("lake")

    def validate(self, suite: Suite, frame: pd.DataFrame) -> list[Outcome]:
        """Run the suite over the frame; results are kept for Data Docs."""
        gx = self._gx
        gx_suite = self.context.suites.add(gx.ExpectationSuite(name=suite.table))
        for e in suite.expectations:
            gx_suite.add_expectation(e.copy())
        batch = self.source.add_dataframe_asset(suite.table).add_batch_definition_whole_dataframe(
            "current"
        )
        definition = self.context.validation_definitions.add(
            gx.ValidationDefinition(name=suite.table, data=batch, suite=gx_suite)
        )
        result = definition.run(
            batch_parameters={"dataframe": frame}, result_format={"result_format": "SUMMARY"}
        )
        for r in result.results:
            raised = _raised(r.exception_info)
            if raised:
                # An argument GX takes but cannot use (min above max, a bad regex): not a
                # failed check of the data, which it was shown as (`observed None`, exit 1).
                label = _label(r.expectation_config)
                raise UserError(f"{suite.path}: {label}: {raised}")
        # A finiteness helper's broken values are all `false`: they would say nothing.
        helpers = {column + FINITE_SUFFIX for column in suite.finite}
        return [
            Outcome(
                expectation=_label(r.expectation_config),
                success=bool(r.success),
                unexpected_count=r.result.get("unexpected_count"),
                observed_value=r.result.get("observed_value"),
                examples=()
                if r.expectation_config.kwargs.get("column") in helpers
                else _examples(r.result.get("partial_unexpected_list") or []),
            )
            for r in result.results
        ]

    def build_docs(self) -> None:
        """Write the Data Docs site for everything validated."""
        self.context.build_data_docs(site_names=[_DOCS_SITE])


def _raised(info: Any) -> str | None:
    """The message of an exception GX caught evaluating an expectation: its info is one dict,
    or one per metric it computed."""
    infos = [info, *info.values()] if isinstance(info, dict) else []
    for one in infos:
        if isinstance(one, dict) and one.get("raised_exception"):
            return str(one.get("exception_message") or "raised an exception").splitlines()[0]
    return None


def _examples(values: list[Any], *, most: int = 3, width: int = 40) -> tuple[str, ...]:
    """Up to `most` distinct values that broke an expectation, as short JSON text: enough to
    tell a typo from a new code without opening the report. NULLs say nothing (the
    expectation's name does)."""
    shown: list[str] = []
    for value in values:
        value = value.item() if hasattr(value, "item") else value  # numpy's scalars
        # A float as JSON would print it, NaN and Infinity bare.
        text = json.dumps(value) if isinstance(value, float) else json.dumps(jsonable(value))
        text = text if len(text) <= width else f"{text[: width - 3]}..."
        if not _missing(value) and text not in shown:
            shown.append(text)
        if len(shown) == most:
            break
    return tuple(shown)


def _missing(value: Any) -> bool:
    # pandas, which GX validates with, reads None, NaN and NaT alike as missing.
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):  # a list or array value
        return False
