"""Draw a pipeline graph with Graphviz: DOT text from the graph (`dot` lays it out, left to
right, one cluster per query around the tables and topics it writes), rendered to SVG or PNG
by the `dot` program."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from html import escape
from pathlib import Path

from engine.errors import UserError
from engine.graph import COLOURS, Graph, Node, style_of, to_mermaid

__all__ = ["FORMATS", "find_dot", "render", "to_dot", "write_graph"]

#: What `--out` can write, by suffix.
FORMATS = (".mmd", ".svg", ".png")
FONT = "DejaVu Sans"
INK = "#0f172a"
DETAIL_INK = "#334155"
EDGE_INK = "#64748b"
TITLE_SIZE = 13
DETAIL_SIZE = 11
#: Resolution of a PNG: 1.5 times the 72 points per inch of the layout, crisp on a screen.
PNG_DPI = 108

#: Graphviz shape and extra style per node kind, close to the Mermaid shapes.
_SHAPES: dict[str, tuple[str, str]] = {
    "source": ("box", "rounded,filled"),
    "view": ("box", "filled"),
    "handler": ("box", "filled"),
    "table": ("cylinder", "filled"),
    "topic": ("polygon", "filled"),
}

_LEGEND = (
    ("source", "source"),
    ("view", "SQL view"),
    ("stateful", "dedup / watermark"),
    ("handler", "state handler"),
    ("table", "Delta table"),
    ("topic", "Kafka topic"),
)


def _quote(text: str) -> str:
    """A DOT quoted string: backslashes and quotes escaped (newlines as spaces)."""
    text = text.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + " ".join(text.splitlines()) + '"'


def _html(text: str) -> str:
    """Text inside an HTML-like label: &, <, > and quotes as entities."""
    return escape(text, quote=True)


def _details(node: Node) -> list[str]:
    lines = list(node.label[1:])
    if len(node.queries) > 1:  # one query: the cluster around the node says which
        lines.append("queries " + ", ".join(node.queries))
    return lines


def _label(node: Node) -> str:
    """An HTML-like label: the title in bold, the details below in smaller grey text (a table
    row each, so that the lines do not touch)."""
    rows = [f"<TR><TD><B>{_html(node.label[0])}</B></TD></TR>"]
    rows += [
        f'<TR><TD><FONT POINT-SIZE="{DETAIL_SIZE}" COLOR="{DETAIL_INK}">{_html(d)}</FONT></TD></TR>'
        for d in _details(node)
    ]
    return f'<<TABLE BORDER="0" CELLSPACING="0" CELLPADDING="1">{"".join(rows)}</TABLE>>'


def _node(node: Node) -> str:
    fill, stroke = COLOURS[style_of(node)]
    shape, style = _SHAPES[node.kind]
    attrs = {
        "id": _quote(f"node-{node.id}"),
        "class": _quote(" ".join(dict.fromkeys((node.kind, style_of(node))))),
        "shape": shape,
        "style": _quote(style),
        "fillcolor": _quote(fill),
        "color": _quote(stroke),
        "tooltip": _quote(f"{node.kind} {node.name}"),
        "label": _label(node),
    }
    if node.kind == "handler":
        attrs["peripheries"] = "2"  # a double outline: a handler keeps state of its own
    if node.kind == "table":
        attrs["margin"] = _quote("0.15,0.11")  # room for the rim at the top
    if node.kind == "topic":
        # A parallelogram, slanted less than Graphviz's own, which gets very wide.
        # Graphviz pads polygons for an inscribed ellipse: a small margin keeps it compact.
        attrs |= {"sides": "4", "skew": "0.25", "margin": _quote("0.04,0.03")}
    return f"{_quote(node.id)} [{', '.join(f'{k}={v}' for k, v in attrs.items())}]"


def _title_label(graph: Graph) -> str:
    """The drawing's title and a colour legend, as one HTML-like table above the graph."""
    present = {style_of(node) for node in graph.nodes}
    cells = "".join(
        f'<TD BGCOLOR="{COLOURS[style][0]}" COLOR="{COLOURS[style][1]}" BORDER="1" '
        f'WIDTH="14" HEIGHT="10" FIXEDSIZE="TRUE"></TD>'
        f'<TD ALIGN="LEFT"><FONT POINT-SIZE="{DETAIL_SIZE}" COLOR="{DETAIL_INK}">'
        f"{_html(text)}</FONT></TD>"
        for style, text in _LEGEND
        if style in present
    )
    title = f'<FONT POINT-SIZE="15"><B>pipeline {_html(graph.pipeline)}</B></FONT>'
    return (
        '<<TABLE BORDER="0" CELLSPACING="4" CELLPADDING="1">'
        f'<TR><TD ALIGN="LEFT" COLSPAN="{2 * len(present)}">{title}</TD></TR>'
        f"<TR>{cells}</TR></TABLE>>"
    )


def _dot_lines(graph: Graph) -> Iterator[str]:
    yield f"digraph {_quote(graph.pipeline)} {{"
    yield (
        f"  graph [rankdir=LR, fontname={_quote(FONT)}, fontcolor={_quote(INK)}, "
        f'bgcolor="#ffffff", nodesep=0.3, ranksep=0.55, pad=0.25, labelloc=t, labeljust=l, '
        f"label={_title_label(graph)}]"
    )
    yield (
        f"  node [fontname={_quote(FONT)}, fontsize={TITLE_SIZE}, fontcolor={_quote(INK)}, "
        'penwidth=1.5, margin="0.15,0.07"]'
    )
    yield f"  edge [color={_quote(EDGE_INK)}, penwidth=1.3, arrowsize=0.7]"
    loose, boxes = graph.boxes()
    for node in loose:
        yield f"  {_node(node)}"
    for group, members in boxes:
        yield f"  subgraph {_quote('cluster_query_' + group.name)} {{"
        yield (
            f"    graph [label=<<I>{_html(group.title)}</I>>, fontsize={DETAIL_SIZE}, "
            f'fontcolor={_quote(DETAIL_INK)}, style="rounded,dashed", color="#94a3b8", '
            "labeljust=l, margin=10]"
        )
        for node in members:
            yield f"    {_node(node)}"
        yield "  }"
    for edge in graph.edges:
        dropped = (
            f" [style=dashed, label=dropped, fontname={_quote(FONT)}, fontsize={DETAIL_SIZE}, "
            f"fontcolor={_quote(DETAIL_INK)}]"
            if edge.dropped
            else ""
        )
        yield f"  {_quote(edge.source)} -> {_quote(edge.target)}{dropped}"
    yield "}"


def to_dot(graph: Graph) -> str:
    """Graphviz DOT text: left to right, shapes and colours per node kind, a dashed cluster per
    query around the tables and topics it writes, a title and legend on top."""
    return "\n".join(_dot_lines(graph)) + "\n"


def find_dot() -> str | None:
    """The path of Graphviz's `dot` program, if it is on PATH."""
    return shutil.which("dot")


def render(dot_text: str, fmt: str, *, option: str = "--out") -> bytes:
    """Lay out DOT text with `dot` and return the drawing in `fmt` (svg or png)."""
    dot = find_dot()
    if dot is None:
        raise UserError(
            f"{option}: drawing needs Graphviz's `dot` program, not found on PATH "
            "(`make setup` installs it, or: apt-get install graphviz)"
        )
    command = [dot, f"-T{fmt}"] + ([f"-Gdpi={PNG_DPI}"] if fmt == "png" else [])
    done = subprocess.run(command, input=dot_text.encode(), capture_output=True, timeout=120)
    if done.returncode != 0:
        lines = [ln for ln in done.stderr.decode(errors="replace").splitlines() if ln.strip()]
        raise RuntimeError(f"dot -T{fmt} failed: {lines[-1] if lines else done.returncode}")
    return done.stdout


def write_graph(graph: Graph, out: Path) -> None:
    """Write the graph as Mermaid (.mmd), or laid out by Graphviz as SVG (.svg) or PNG (.png);
    the suffix decides."""
    suffix = out.suffix.lower()
    if suffix not in FORMATS:
        raise UserError(f"--out {out}: unknown format '{out.suffix}' (use .mmd, .svg or .png)")
    if not out.parent.is_dir():
        raise UserError(f"--out {out}: folder not found: {out.parent}")
    if suffix == ".mmd":
        out.write_text(to_mermaid(graph))
        return
    out.write_bytes(render(to_dot(graph), suffix[1:], option=f"--out {out}"))
