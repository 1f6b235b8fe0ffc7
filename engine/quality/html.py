"""The quality report as one self-contained HTML page, readable offline.

Great Expectations' Data Docs index is filled in by scripts from public CDNs, so without a
network it shows no results; this page needs nothing but itself and links to the Data Docs.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["write_report_html"]

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 1.5em; }
table { border-collapse: collapse; margin-top: .5em; }
td, th { border: 1px solid #ccc; padding: .3em .6em; text-align: left; }
th { background: #f3f3f3; }
.ok { color: #1a7f37; font-weight: bold; } .bad { color: #cf222e; font-weight: bold; }
.meta { color: #555; }
"""


def _docs_page(docs_dir: Path, table: str, report_dir: Path) -> str | None:
    pages = sorted((docs_dir / "validations" / table).rglob("*.html"))
    return str(pages[-1].relative_to(report_dir)) if pages else None


def _status(passed: bool) -> str:
    return '<span class="ok">passed</span>' if passed else '<span class="bad">FAILED</span>'


def _table_section(name: str, result: Mapping[str, Any], link: str | None) -> str:
    rows = []
    for e in result["expectations"]:
        count = (
            f"observed {html.escape(str(e['observed_value']))}"
            if e["unexpected_count"] is None
            else f"{e['unexpected_count']:,} unexpected"
        )
        rows.append(
            f"<tr><td>{_status(e['success'])}</td><td>{html.escape(e['expectation'])}</td>"
            f"<td>{count}</td></tr>"
        )
    body = (
        "<table><tr><th>status</th><th>expectation</th><th>result</th></tr>"
        + "".join(rows)
        + "</table>"
        if rows
        else "<p>No rows to validate.</p>"
    )
    docs = f' · <a href="{html.escape(link)}">Great Expectations page</a>' if link else ""
    return (
        f"<h2>{html.escape(name)}: {_status(result['passed'])}</h2>"
        f'<p class="meta">Delta version {result["version"]}, {html.escape(result["scope"])}, '
        f"{result['rows']:,} rows{docs}</p>{body}"
    )


def write_report_html(summary: Mapping[str, Any], report_dir: Path, docs_dir: Path) -> Path:
    """Write `<report_dir>/index.html` from the JSON summary; returns its path."""
    sections = [
        _table_section(name, result, _docs_page(docs_dir, name, report_dir))
        for name, result in summary["tables"].items()
    ]
    skipped = "".join(
        f"<p class='meta'>{html.escape(n)}: skipped (not in the lake)</p>"
        for n in summary["skipped"]
    )
    page = (
        "<!doctype html><html><head><meta charset='utf-8'><title>Data quality</title>"
        f"<style>{_STYLE}</style></head><body>"
        f"<h1>Data quality: {_status(summary['passed'])}</h1>"
        f"<p class='meta'>Lake {html.escape(summary['lake'])}, validated at "
        f"{html.escape(summary['validated_at'])}</p>{skipped}{''.join(sections)}</body></html>"
    )
    path = report_dir / "index.html"
    path.write_text(page)
    return path
