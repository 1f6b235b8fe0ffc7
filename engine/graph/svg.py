"""Draw a pipeline graph without a browser-side renderer: a small layered layout (columns by
longest path from the source, left to right), SVG text, and PNG through headless Chromium."""

from __future__ import annotations

import math
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

from engine.errors import UserError
from engine.graph import COLOURS, Edge, Graph, Node, style_of, to_mermaid

__all__ = [
    "Box",
    "Layout",
    "Route",
    "find_chromium",
    "layout",
    "svg_to_png",
    "to_svg",
    "write_graph",
]

# Sizes in SVG user units (pixels at scale 1).
FONT = "DejaVu Sans, Verdana, Arial, Helvetica, sans-serif"
TITLE_SIZE = 13.0
DETAIL_SIZE = 11.0
LINE_GAP = 4.0
PAD_X, PAD_Y = 14.0, 9.0
ROW_GAP = 22.0  # between boxes of one column
COLUMN_GAP = 64.0  # between columns: room for the edge curves
DUMMY_HEIGHT = 10.0  # the slot a long edge takes in a column it crosses
MARGIN = 20.0
HEADER = 34.0  # the pipeline's name above the graph
LEGEND_HEIGHT = 44.0

# Extra width each shape needs around its text (stadium ends, slanted sides, side bars).
_SHAPE_EXTRA = {"source": 16.0, "view": 0.0, "handler": 16.0, "table": 0.0, "topic": 24.0}
_CYLINDER_RY = 6.0  # the ellipse of a table's top and bottom
_SKEW = 12.0  # a topic parallelogram's horizontal slant


def _text_width(text: str, size: float, *, bold: bool = False) -> float:
    """An over-estimate of the rendered width: no font metrics without a browser, and a box
    slightly too wide reads better than text spilling out of it (DejaVu Sans is wide)."""
    units = 0.0
    for char in text:
        if char in "il.,:;'|!·":
            units += 0.34
        elif char in "fjrt()[]/ -":
            units += 0.45
        elif char in "mwMW":
            units += 0.95
        elif char.isupper() or char in "_":
            units += 0.74
        else:
            units += 0.63
    return units * size * (1.08 if bold else 1.0)


@dataclass(frozen=True)
class Box:
    """Where a node is drawn: top-left corner and size."""

    node: Node
    x: float
    y: float
    width: float
    height: float

    @property
    def cy(self) -> float:
        """Vertical centre."""
        return self.y + self.height / 2

    def side_x(self, y: float, side: str) -> float:
        """Where the shape's outline is at height `y` on its left or right side, so that edges
        end on the outline of stadiums and parallelograms too."""
        left = side == "left"
        kind = self.node.kind
        if kind == "source":
            r = self.height / 2
            dy = min(abs(y - self.cy), r)
            inset = r - math.sqrt(r * r - dy * dy)
            return self.x + inset if left else self.x + self.width - inset
        if kind == "topic":
            # Top edge shifted right by _SKEW: the left side runs from (x+skew, top) to (x, bottom).
            t = (self.y + self.height - y) / self.height
            return self.x + _SKEW * t if left else self.x + self.width - _SKEW * (1 - t)
        return self.x if left else self.x + self.width


@dataclass(frozen=True)
class Route:
    """An edge's way through the columns: `points` are pairs (enter, leave) of each column it
    crosses, between its start on the source box and its end on the target box."""

    edge: Edge
    points: tuple[tuple[float, float], ...]


@dataclass(frozen=True)
class Layout:
    """Boxes by node id, edge routes and the drawing's size."""

    boxes: Mapping[str, Box]
    routes: tuple[Route, ...]
    width: float
    height: float


def _node_size(node: Node) -> tuple[float, float]:
    widths = [_text_width(node.label[0], TITLE_SIZE, bold=True)]
    widths += [_text_width(line, DETAIL_SIZE) for line in _details(node)]
    lines = 1 + len(_details(node))
    height = TITLE_SIZE + (lines - 1) * (DETAIL_SIZE + LINE_GAP) + 2 * PAD_Y + 4
    if node.kind == "table":
        height += 2 * _CYLINDER_RY
    return max(widths) + 2 * PAD_X + _SHAPE_EXTRA[node.kind], height


def _details(node: Node) -> list[str]:
    lines = list(node.label[1:])
    if node.queries:
        lines.append("query " + ", ".join(node.queries))
    return lines


def _layers(graph: Graph) -> dict[str, int]:
    """Longest path from a node without inputs: every edge points to a later column."""
    preds: dict[str, list[str]] = {n.id: [] for n in graph.nodes}
    for edge in graph.edges:
        preds[edge.target].append(edge.source)
    layer: dict[str, int] = {}

    def visit(node_id: str) -> int:
        if node_id not in layer:
            layer[node_id] = 1 + max((visit(p) for p in preds[node_id]), default=-1)
        return layer[node_id]

    for node in graph.nodes:
        visit(node.id)
    return layer


def _crossings(order: Sequence[Sequence[str]], links: Iterable[tuple[str, str]]) -> int:
    pos = {v: i for column in order for i, v in enumerate(column)}
    col = {v: c for c, column in enumerate(order) for v in column}
    by_column: dict[int, list[tuple[int, int]]] = {}
    for a, b in links:
        by_column.setdefault(col[a], []).append((pos[a], pos[b]))
    total = 0
    for pairs in by_column.values():
        for i, (a1, b1) in enumerate(pairs):
            for a2, b2 in pairs[i + 1 :]:
                total += (a1 - a2) * (b1 - b2) < 0
    return total


def _order_columns(
    columns: list[list[str]], links: list[tuple[str, str]], rounds: int = 8
) -> list[list[str]]:
    """Barycentre ordering (sweeps right, then left), keeping the order with fewest crossings;
    ties keep the plan's order, so the drawing is the same from run to run."""
    preds: dict[str, list[str]] = {}
    succs: dict[str, list[str]] = {}
    for a, b in links:
        succs.setdefault(a, []).append(b)
        preds.setdefault(b, []).append(a)
    best = [list(c) for c in columns]
    best_score = _crossings(best, links)
    order = [list(c) for c in columns]
    for r in range(rounds):
        forward = r % 2 == 0
        near = preds if forward else succs
        indices = range(1, len(order)) if forward else range(len(order) - 2, -1, -1)
        for c in indices:
            pos = {v: i for i, v in enumerate(order[c - 1] if forward else order[c + 1])}

            def barycentre(
                item: tuple[int, str], pos: dict[str, int] = pos, near: dict = near
            ) -> float:
                i, v = item
                ns = [pos[n] for n in near.get(v, []) if n in pos]
                return sum(ns) / len(ns) if ns else float(i)

            order[c] = [v for _, v in sorted(enumerate(order[c]), key=barycentre)]
        score = _crossings(order, links)
        if score < best_score:
            best, best_score = [list(c) for c in order], score
    return best


def _place_column(
    column: list[str], heights: Mapping[str, float], wanted: Mapping[str, float]
) -> dict[str, float]:
    """Centres as close to `wanted` as the column allows: pushed down to keep the gap, then
    the whole column moved back by the average push, which keeps the gaps."""
    centres: dict[str, float] = {}
    previous: str | None = None
    for v in column:
        y = wanted[v]
        if previous is not None:
            floor = centres[previous] + (heights[previous] + heights[v]) / 2 + ROW_GAP
            y = max(y, floor)
        centres[v] = y
        previous = v
    shift = sum(centres[v] - wanted[v] for v in column) / len(column)
    return {v: y - shift for v, y in centres.items()}


def layout(graph: Graph) -> Layout:
    """Columns by longest path; long edges get a slot in each column they cross, so they pass
    between boxes and never through one; boxes are pulled level with their neighbours."""
    layer = _layers(graph)
    sizes = {n.id: _node_size(n) for n in graph.nodes}
    n_columns = 1 + max(layer.values(), default=0)
    columns: list[list[str]] = [[] for _ in range(n_columns)]
    for node in graph.nodes:
        columns[layer[node.id]].append(node.id)

    # Split each edge into one link per column step through dummy slots.
    links: list[tuple[str, str]] = []
    chains: list[list[str]] = []
    for i, edge in enumerate(graph.edges):
        chain = [edge.source]
        for c in range(layer[edge.source] + 1, layer[edge.target]):
            dummy = f"#dummy{i}_{c}"
            columns[c].append(dummy)
            sizes[dummy] = (0.0, DUMMY_HEIGHT)
            chain.append(dummy)
        chain.append(edge.target)
        links += list(pairwise(chain))
        chains.append(chain)
    columns = _order_columns(columns, links)

    heights = {v: size[1] for v, size in sizes.items()}
    preds: dict[str, list[str]] = {}
    succs: dict[str, list[str]] = {}
    for a, b in links:
        succs.setdefault(a, []).append(b)
        preds.setdefault(b, []).append(a)
    centre: dict[str, float] = {}
    for column in columns:  # start: each column stacked from the top
        y = 0.0
        for v in column:
            centre[v] = y + heights[v] / 2
            y += heights[v] + ROW_GAP
    # Alternate sweeps pull each box level with the average of its neighbours on one side.
    for sweep in range(6):
        forward = sweep % 2 == 0
        near = preds if forward else succs
        for column in columns if forward else reversed(columns):
            wanted = {}
            for v in column:
                ns = near.get(v, [])
                wanted[v] = sum(centre[n] for n in ns) / len(ns) if ns else centre[v]
            centre.update(_place_column(column, heights, wanted))
    # A last rightward sweep: columns then follow their inputs, as a reader does.
    for column in columns[1:]:
        wanted = {
            v: sum(centre[n] for n in preds[v]) / len(preds[v]) if preds.get(v) else centre[v]
            for v in column
        }
        centre.update(_place_column(column, heights, wanted))

    widths = [max((sizes[v][0] for v in column), default=0.0) for column in columns]
    lefts, x = [], MARGIN
    for w in widths:
        lefts.append(x)
        x += w + COLUMN_GAP
    top = min(centre[v] - heights[v] / 2 for v in centre)
    offset = MARGIN + HEADER - top
    boxes: dict[str, Box] = {}
    column_of = {v: c for c, column in enumerate(columns) for v in column}
    for node in graph.nodes:
        c = column_of[node.id]
        w, h = sizes[node.id]
        cx = lefts[c] + widths[c] / 2
        boxes[node.id] = Box(node, cx - w / 2, centre[node.id] + offset - h / 2, w, h)

    ports = _ports(graph, boxes)
    routes = []
    for edge, chain in zip(graph.edges, chains, strict=True):
        start, end = ports[(edge, "out")], ports[(edge, "in")]
        points = [start]
        for dummy in chain[1:-1]:
            c = column_of[dummy]
            y = centre[dummy] + offset
            points += [(lefts[c], y), (lefts[c] + widths[c], y)]
        points.append(end)
        routes.append(Route(edge, tuple(points)))

    bottom = max(b.y + b.height for b in boxes.values())
    height = bottom + MARGIN + LEGEND_HEIGHT
    width = max(x - COLUMN_GAP + MARGIN, _legend_width() + 2 * MARGIN)
    return Layout(boxes, tuple(routes), width, height)


def _ports(graph: Graph, boxes: Mapping[str, Box]) -> dict[tuple[Edge, str], tuple[float, float]]:
    """Where each edge leaves and enters its boxes: spread over the middle of the side, in
    the order of the other ends, so arrowheads into one box do not sit on top of each other."""
    sides: dict[tuple[str, str], list[Edge]] = {}
    for edge in graph.edges:
        sides.setdefault((edge.source, "out"), []).append(edge)
        sides.setdefault((edge.target, "in"), []).append(edge)
    ports: dict[tuple[Edge, str], tuple[float, float]] = {}
    for (node_id, direction), edges in sides.items():
        box = boxes[node_id]
        other = (
            (lambda e: boxes[e.target].cy) if direction == "out" else lambda e: boxes[e.source].cy
        )
        edges = sorted(edges, key=other)
        span = min(box.height * 0.5, 12.0 * (len(edges) - 1))
        for i, edge in enumerate(edges):
            y = box.cy - span / 2 + (span * i / (len(edges) - 1) if len(edges) > 1 else span / 2)
            x = box.side_x(y, "right" if direction == "out" else "left")
            ports[(edge, direction)] = (x, y)
    return ports


def _path(points: Sequence[tuple[float, float]]) -> str:
    """Cubic curves between columns, straight across the columns a long edge passes."""
    (x0, y0), rest = points[0], points[1:]
    parts = [f"M{x0:.1f},{y0:.1f}"]
    px, py = x0, y0
    for i in range(0, len(rest), 2):
        x, y = rest[i]
        dx = max((x - px) / 2, 10.0)
        parts.append(f"C{px + dx:.1f},{py:.1f} {x - dx:.1f},{y:.1f} {x:.1f},{y:.1f}")
        if i + 1 < len(rest):
            px, py = rest[i + 1]
            parts.append(f"L{px:.1f},{py:.1f}")
    return " ".join(parts)


def _shape(node: Node, x: float, y: float, w: float, h: float, fill: str, stroke: str) -> str:
    paint = f'fill="{fill}" stroke="{stroke}" stroke-width="1.5"'
    if node.kind == "source":
        box = f'x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}"'
        return f'<rect {box} rx="{h / 2:.1f}" {paint}/>'
    if node.kind == "handler":
        # Mermaid's subroutine shape: a box with a bar inside each side.
        bars = "".join(
            f'<line x1="{bx:.1f}" y1="{y:.1f}" x2="{bx:.1f}" y2="{y + h:.1f}" stroke="{stroke}" '
            'stroke-width="1.5"/>'
            for bx in (x + 7, x + w - 7)
        )
        return f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}" {paint}/>{bars}'
    if node.kind == "table":
        ry = _CYLINDER_RY
        rx = w / 2
        body = (
            f"M{x:.1f},{y + ry:.1f} A{rx:.1f},{ry:.1f} 0 0 1 {x + w:.1f},{y + ry:.1f} "
            f"V{y + h - ry:.1f} A{rx:.1f},{ry:.1f} 0 0 1 {x:.1f},{y + h - ry:.1f} Z"
        )
        rim = f"M{x:.1f},{y + ry:.1f} A{rx:.1f},{ry:.1f} 0 0 0 {x + w:.1f},{y + ry:.1f}"
        outline = f'fill="none" stroke="{stroke}" stroke-width="1.5"'
        return f'<path d="{body}" {paint}/><path d="{rim}" {outline}/>'
    if node.kind == "topic":
        pts = [(x + _SKEW, y), (x + w, y), (x + w - _SKEW, y + h), (x, y + h)]
        return f'<polygon points="{" ".join(f"{px:.1f},{py:.1f}" for px, py in pts)}" {paint}/>'
    return f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}" rx="4" {paint}/>'


def _node_svg(box: Box) -> str:
    node = box.node
    fill, stroke = COLOURS[style_of(node)]
    lines = [(node.label[0], TITLE_SIZE, True), *((d, DETAIL_SIZE, False) for d in _details(node))]
    text_height = TITLE_SIZE + (len(lines) - 1) * (DETAIL_SIZE + LINE_GAP)
    y = box.cy - text_height / 2 + TITLE_SIZE * 0.8
    if node.kind == "table":
        y += _CYLINDER_RY / 2  # the rim takes room at the top
    texts = []
    for i, (text, size, bold) in enumerate(lines):
        if i:
            y += DETAIL_SIZE + LINE_GAP
        weight = ' font-weight="bold"' if bold else ' fill="#334155"'
        texts.append(
            f'<text x="{box.x + box.width / 2:.1f}" y="{y:.1f}" font-size="{size:g}"{weight}>'
            f"{escape(text)}</text>"
        )
    attrs = (
        f'class="node {node.kind}" id={quoteattr("node-" + node.id)} '
        f'data-x="{box.x:.1f}" data-y="{box.y:.1f}" data-width="{box.width:.1f}" '
        f'data-height="{box.height:.1f}"'
    )
    shape = _shape(node, box.x, box.y, box.width, box.height, fill, stroke)
    title = f"<title>{escape(node.kind)} {escape(node.name)}</title>"
    return f"  <g {attrs}>\n    {title}\n    {shape}\n    {''.join(texts)}\n  </g>"


_LEGEND = (
    ("source", "source"),
    ("view", "SQL view"),
    ("stateful", "dedup / watermark"),
    ("handler", "state handler"),
    ("table", "Delta table"),
    ("topic", "Kafka topic"),
)


def _legend_width() -> float:
    return sum(_text_width(text, DETAIL_SIZE) + 22 + 18 for _, text in _LEGEND)


def _legend_svg(y: float) -> str:
    items, x = [], MARGIN
    for style, text in _LEGEND:
        fill, stroke = COLOURS[style]
        items.append(
            f'<rect x="{x:.1f}" y="{y:.1f}" width="16" height="12" rx="2" fill="{fill}" '
            f'stroke="{stroke}" stroke-width="1.5"/>'
            f'<text x="{x + 22:.1f}" y="{y + 10:.1f}" font-size="{DETAIL_SIZE:g}" '
            f'text-anchor="start" fill="#334155">{escape(text)}</text>'
        )
        x += _text_width(text, DETAIL_SIZE) + 22 + 18
    return f'  <g class="legend">{"".join(items)}</g>'


def to_svg(graph: Graph, laid_out: Layout | None = None) -> str:
    """A standalone SVG document of the graph: one `<g class="node KIND">` per node (with its
    box as data-x/y/width/height), one `<path class="edge">` per edge."""
    lay = laid_out or layout(graph)
    w, h = math.ceil(lay.width), math.ceil(lay.height)
    edges = [
        f'  <path class="edge" d="{_path(r.points)}" data-source="{r.edge.source}" '
        f'data-target="{r.edge.target}" fill="none" stroke="#64748b" stroke-width="1.5" '
        'marker-end="url(#arrow)"/>'
        for r in lay.routes
    ]
    nodes = [_node_svg(lay.boxes[n.id]) for n in graph.nodes]
    parts = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
        f'viewBox="0 0 {w} {h}" font-family="{FONT}" text-anchor="middle" fill="#0f172a">',
        f"  <title>pipeline {escape(graph.pipeline)}</title>",
        "  <defs>",
        '    <marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="9" '
        'markerHeight="9" markerUnits="userSpaceOnUse" orient="auto">',
        '      <path d="M0,0 L10,5 L0,10 Z" fill="#64748b"/>',
        "    </marker>",
        "  </defs>",
        f'  <rect width="{w}" height="{h}" fill="#ffffff"/>',
        f'  <text x="{MARGIN}" y="{MARGIN + 12}" font-size="15" font-weight="bold" '
        f'text-anchor="start">pipeline {escape(graph.pipeline)}</text>',
        *edges,
        *nodes,
        _legend_svg(h - MARGIN - 16),
        "</svg>",
    ]
    return "\n".join(parts) + "\n"


def find_chromium() -> str | None:
    """A Chromium binary, if this machine has one."""
    if Path("/usr/bin/chromium").is_file():
        return "/usr/bin/chromium"
    return shutil.which("chromium") or shutil.which("chromium-browser")


def svg_to_png(svg: str, out: Path, width: int, height: int, *, chromium: str) -> None:
    """Screenshot the SVG with headless Chromium, offline and with a throwaway profile."""
    with tempfile.TemporaryDirectory(prefix="graph-") as tmp:
        svg_path = Path(tmp) / "graph.svg"
        svg_path.write_text(svg)
        command = [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            f"--user-data-dir={Path(tmp) / 'profile'}",
            f"--window-size={width},{height}",
            f"--screenshot={out.resolve()}",
            svg_path.as_uri(),
        ]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    if done.returncode != 0 or not out.is_file():
        lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
        raise RuntimeError(
            f"chromium could not render {out}: {lines[-1] if lines else done.returncode}"
        )


def write_graph(graph: Graph, out: Path) -> None:
    """Write the graph as Mermaid (.mmd), SVG (.svg) or PNG (.png); the suffix decides."""
    suffix = out.suffix.lower()
    if suffix not in (".mmd", ".svg", ".png"):
        raise UserError(f"--out {out}: unknown format '{out.suffix}' (use .mmd, .svg or .png)")
    if not out.parent.is_dir():
        raise UserError(f"--out {out}: folder not found: {out.parent}")
    if suffix == ".mmd":
        out.write_text(to_mermaid(graph))
        return
    lay = layout(graph)
    svg = to_svg(graph, lay)
    if suffix == ".svg":
        out.write_text(svg)
        return
    chromium = find_chromium()
    if chromium is None:
        raise UserError(f"--out {out}: PNG needs Chromium, not found here; write .svg instead")
    svg_to_png(svg, out, math.ceil(lay.width), math.ceil(lay.height), chromium=chromium)
