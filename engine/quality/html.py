"""The quality report as one self-contained HTML page, readable offline.

Great Expectations' Data Docs index is filled in by scripts from public CDNs, so without a
network it shows no results; this page needs nothing but itself and links to the Data Docs.
Each table's past (its last validations, its rows over time) comes in as plain values, so the
page can be written and tested without a lake.
"""

from __future__ import annotations

import datetime as dt
import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Check", "TableHistory", "write_report_html"]

#: Most vertices per chart: a long-lived table has thousands of batches, a glance needs few.
_MOST_POINTS = 200
_CHART_W, _CHART_H, _PAD, _TOP = 240, 60, 5, 18

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 1.5em; }
table { border-collapse: collapse; margin-top: .5em; }
td, th { border: 1px solid #ccc; padding: .3em .6em; text-align: left; vertical-align: middle; }
th { background: #f3f3f3; }
th .sub { font-weight: normal; font-size: .85em; color: #555; white-space: nowrap; }
.ok { color: #1a7f37; font-weight: bold; } .bad { color: #cf222e; font-weight: bold; }
.meta { color: #555; }
.history { white-space: nowrap; }
.strip { display: inline-flex; gap: 2px; vertical-align: middle; }
.mark { display: inline-block; width: 1.15em; height: 1.15em; line-height: 1.15em;
  text-align: center; border-radius: 3px; color: #fff; font-weight: bold; font-size: .9em; }
.mark.pass { background: #1a7f37; } .mark.fail { background: #cf222e; }
.tally { margin-left: .5em; font-size: .9em; }
.chart { display: block; } .chart text { font-size: 10px; fill: #555; }
.legend { font-size: .8em; color: #555; white-space: nowrap; }
.key-line { display: inline-block; width: 1.2em; border-top: 2px solid #0969da;
  vertical-align: middle; }
.key-dot { display: inline-block; width: .5em; height: .5em; border: 1.5px solid #222;
  border-radius: 50%; vertical-align: middle; }
"""


@dataclass(frozen=True)
class Check:
    """One past validation of a table."""

    at: dt.datetime
    passed: bool
    rows: int
    #: The rows validated were the whole table, so `rows` was its row count then.
    whole: bool = True
    failed: tuple[str, ...] = ()


@dataclass(frozen=True)
class TableHistory:
    """A table's past, oldest first: its validations and its rows over time."""

    checks: Sequence[Check] = ()
    #: Rows written to the table in all, after each batch that wrote to it.
    written: Sequence[tuple[dt.datetime, int]] = ()
    #: The table's row count at each whole-table validation.
    counted: Sequence[tuple[dt.datetime, int]] = ()


def _docs_page(docs_dir: Path, table: str, report_dir: Path) -> str | None:
    pages = sorted((docs_dir / "validations" / table).rglob("*.html"))
    return str(pages[-1].relative_to(report_dir)) if pages else None


def _status(passed: bool) -> str:
    return '<span class="ok">passed</span>' if passed else '<span class="bad">FAILED</span>'


def _when(at: dt.datetime) -> str:
    return f"{at.astimezone(dt.UTC):%Y-%m-%d %H:%M} UTC"


def _strip(checks: Sequence[Check]) -> str:
    if not checks:
        return '<span class="meta">none logged</span>'
    marks = []
    for c in checks:
        rows = f"{c.rows:,} row{'' if c.rows == 1 else 's'}"
        what = "passed" if c.passed else "FAILED: " + "; ".join(c.failed)
        title = html.escape(f"{_when(c.at)}: {what} ({rows})", quote=True)
        kind, glyph = ("pass", "✓") if c.passed else ("fail", "✗")
        marks.append(f'<span class="mark {kind}" title="{title}">{glyph}</span>')
    failed = sum(not c.passed for c in checks)
    tally = f"{failed} failed of {len(checks)}" if failed else f"all {len(checks)} passed"
    return (
        f'<span class="history"><span class="strip">{"".join(marks)}</span>'
        f'<span class="tally meta">{tally}</span></span>'
    )


def _thin(points: Sequence[tuple[dt.datetime, int]]) -> list[tuple[dt.datetime, int]]:
    if len(points) <= _MOST_POINTS:
        return list(points)
    step = (len(points) - 1) / (_MOST_POINTS - 1)
    return [points[round(i * step)] for i in range(_MOST_POINTS)]


def _rows(n: int) -> str:
    return f"{n:,} row{'' if n == 1 else 's'}"


def _times(history: TableHistory) -> list[dt.datetime]:
    return [t for t, _ in [*history.written, *history.counted]]


def _chart(history: TableHistory, start: dt.datetime, end: dt.datetime) -> str:
    # Every table's chart spans the same time, so a glance down the column compares them.
    written, counted = _thin(history.written), _thin(history.counted)
    if not written and not counted:
        return '<span class="meta">no rows logged</span>'
    span = (end - start).total_seconds()
    top = max(v for _, v in written + counted) or 1

    def x(at: dt.datetime) -> str:
        share = (at - start).total_seconds() / span if span else 0.5
        return f"{_PAD + (_CHART_W - 2 * _PAD) * share:.1f}"

    def y(rows: int) -> str:
        return f"{_CHART_H - _PAD - (_CHART_H - _PAD - _TOP) * rows / top:.1f}"

    parts = [
        f'<line x1="{_PAD}" y1="{y(0)}" x2="{_CHART_W - _PAD}" y2="{y(0)}" stroke="#ccc"/>',
        f'<line x1="{_PAD}" y1="{y(top)}" x2="{_CHART_W - _PAD}" y2="{y(top)}" '
        'stroke="#eee" stroke-dasharray="2 2"/>',
        f'<text x="{_PAD}" y="{_TOP - 7}">{_rows(top)}</text>',
    ]
    legend = []
    if written:
        points = " ".join(f"{x(t)},{y(v)}" for t, v in written)
        parts.append(
            f'<polyline points="{points}" fill="none" stroke="#0969da" stroke-width="2">'
            f"<title>rows written: {written[-1][1]:,} by {_when(written[-1][0])}</title>"
            "</polyline>"
        )
        legend.append(
            '<span title="rows the logged batches wrote, in all (a merge counts every upsert)">'
            f'<span class="key-line"></span> written {written[-1][1]:,}</span>'
        )
    for t, v in counted:
        parts.append(
            f'<circle cx="{x(t)}" cy="{y(v)}" r="3" fill="#fff" stroke="#222" stroke-width="1.5">'
            f"<title>{_when(t)}: {_rows(v)} in the table</title></circle>"
        )
    if counted:
        legend.append(
            '<span title="rows in the table when a validation checked all of it">'
            f'<span class="key-dot"></span> in table {counted[-1][1]:,}</span>'
        )
    svg = (
        f'<svg class="chart" width="{_CHART_W}" height="{_CHART_H}" '
        f'viewBox="0 0 {_CHART_W} {_CHART_H}" role="img" aria-label="rows over time">'
        f"{''.join(parts)}</svg>"
    )
    return f'{svg}<div class="legend">{" · ".join(legend)}</div>'


def _period(start: dt.datetime, end: dt.datetime) -> str:
    first, final = (f"{t.astimezone(dt.UTC):%Y-%m-%d}" for t in (start, end))
    if first == final:
        return f"{first} {start.astimezone(dt.UTC):%H:%M} → {end.astimezone(dt.UTC):%H:%M} UTC"
    return f"{first} → {final}"


def _overview(summary: Mapping[str, Any], history: Mapping[str, TableHistory], last: int) -> str:
    if not summary["tables"]:
        return ""
    pasts = {name: history.get(name, TableHistory()) for name in summary["tables"]}
    times = [t for past in pasts.values() for t in _times(past)]
    period = (min(times), max(times)) if times else None
    rows = []
    for name, past in pasts.items():
        recent = past.checks[-last:] if last > 0 else []
        chart = _chart(past, *period) if period else '<span class="meta">no rows logged</span>'
        rows.append(
            f'<tr><td><a href="#t-{html.escape(name, quote=True)}">{html.escape(name)}</a></td>'
            f"<td>{_status(summary['tables'][name]['passed'])}</td><td>{_strip(recent)}</td>"
            f"<td>{chart}</td></tr>"
        )
    when = f'<br><span class="sub">{_period(*period)}</span>' if period else ""
    head = (
        f"<tr><th>table</th><th>now</th><th>last {last} validations"
        '<br><span class="sub">oldest → newest</span></th>'
        f"<th>rows over time{when}</th></tr>"
    )
    return f"<table>{head}{''.join(rows)}</table>"


def _table_section(name: str, result: Mapping[str, Any], link: str | None) -> str:
    rows = []
    for e in result["expectations"]:
        count = (
            f"observed {html.escape(str(e['observed_value']))}"
            if e["unexpected_count"] is None
            else f"{e['unexpected_count']:,} unexpected"
            + (f" (e.g. {html.escape(', '.join(e['examples']))})" if e.get("examples") else "")
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
        f'<section id="t-{html.escape(name, quote=True)}">'
        f"<h2>{html.escape(name)}: {_status(result['passed'])}</h2>"
        f'<p class="meta">Delta version {result["version"]}, {html.escape(result["scope"])}, '
        f"{result['rows']:,} rows{docs}</p>{body}</section>"
    )


def write_report_html(
    summary: Mapping[str, Any],
    report_dir: Path,
    docs_dir: Path,
    history: Mapping[str, TableHistory] | None = None,
    *,
    last: int = 10,
) -> Path:
    """Write `<report_dir>/index.html` from the JSON summary and each table's history (its
    `last` validations at most, and rows over time); returns its path."""
    sections = [
        _table_section(name, result, _docs_page(docs_dir, name, report_dir))
        for name, result in summary["tables"].items()
    ]
    skipped = "".join(
        f"<p class='meta'>{html.escape(name)}: skipped ({html.escape(why)})</p>"
        for name, why in summary["skipped"].items()
    )
    page = (
        "<!doctype html><html><head><meta charset='utf-8'><title>Data quality</title>"
        f"<style>{_STYLE}</style></head><body>"
        f"<h1>Data quality: {_status(summary['passed'])}</h1>"
        f"<p class='meta'>Lake {html.escape(summary['lake'])}, validated at "
        f"{html.escape(summary['validated_at'])}</p>{skipped}"
        f"{_overview(summary, history or {}, last)}{''.join(sections)}</body></html>"
    )
    path = report_dir / "index.html"
    path.write_text(page, encoding="utf-8")
    return path
