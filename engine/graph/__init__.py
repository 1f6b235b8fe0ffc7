"""A pipeline's graph (source, SQL views, handlers, Delta tables, Kafka topics) built from the
plan without Spark, and its Mermaid text; `engine.graph.dot` has Graphviz draw it as SVG or
PNG."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

from engine.definitions.durations import parse_duration
from engine.definitions.pipeline import REAL_TIME, Pipeline
from engine.definitions.sql import SqlStep
from engine.plan import Plan, plan_pipeline

__all__ = [
    "Edge",
    "Graph",
    "Node",
    "NodeKind",
    "QueryGroup",
    "graph_of",
    "pipeline_graph",
    "to_mermaid",
]

NodeKind = Literal["source", "view", "handler", "table", "topic"]


@dataclass(frozen=True)
class Node:
    """One box of the graph. `id` is a valid Mermaid id, unique in the graph; `label` is the
    text, one line per item, the first being the title."""

    id: str
    kind: NodeKind
    name: str
    label: tuple[str, ...]
    #: For a view: it deduplicates or carries a WATERMARK (state kept between batches).
    stateful: bool = False
    #: For a table or topic: the queries that write it.
    queries: tuple[str, ...] = ()


@dataclass(frozen=True)
class Edge:
    """Data flows from node `source` to node `target` (ids); `query` is set on sink edges."""

    source: str
    target: str
    query: str | None = None
    #: The rows a view's expectations drop, on their way to the quarantine table.
    dropped: bool = False


@dataclass(frozen=True)
class QueryGroup:
    """A streaming query and the table and topic nodes (ids) it writes."""

    name: str
    title: str
    members: tuple[str, ...]


@dataclass(frozen=True)
class Graph:
    """A pipeline's nodes (source first, then views and handlers in build order, then sinks),
    edges and queries."""

    pipeline: str
    nodes: tuple[Node, ...]
    edges: tuple[Edge, ...]
    queries: tuple[QueryGroup, ...]

    def boxes(self) -> tuple[list[Node], list[tuple[QueryGroup, list[Node]]]]:
        """The nodes outside every query box, then each query box that has nodes, with them:
        the order both drawings (Mermaid, Graphviz) lay them out in."""
        by_id = {node.id: node for node in self.nodes}
        grouped = {member for group in self.queries for member in group.members}
        loose = [node for node in self.nodes if node.id not in grouped]
        boxes = [(g, [by_id[m] for m in g.members]) for g in self.queries if g.members]
        return loose, boxes

    def find(self, kind: NodeKind, name: str) -> Node:
        """The node of this kind and name (KeyError if none)."""
        for node in self.nodes:
            if node.kind == kind and node.name == name:
                return node
        raise KeyError(f"{kind} {name}")

    def named_edges(self) -> set[tuple[str, str]]:
        """Edges as ("kind:name", "kind:name") pairs: readable in tests and messages."""
        by_id = {n.id: f"{n.kind}:{n.name}" for n in self.nodes}
        return {(by_id[e.source], by_id[e.target]) for e in self.edges}


_UNSAFE = re.compile(r"[^A-Za-z0-9_]")


def _delay_text(delay: str) -> str:
    """`INTERVAL '1' MINUTE` -> `1 minute`: the form users write in settings."""
    try:
        return str(parse_duration(delay))
    except ValueError:
        return delay


def _view_notes(step: SqlStep, delay_setting: str) -> list[str]:
    notes = []
    if step.distinct:
        notes.append(f"dedup on {', '.join(step.dedup_keys)}" if step.dedup_keys else "dedup")
    for _, delay in step.watermarks:
        # The watermark_delay setting replaces every delay written in the SQL (engine.plan).
        notes.append(f"watermark {delay_setting or _delay_text(delay)}")
    if step.expectations:
        rules = len(step.expectations)
        notes.append(f"{rules} expectation{'s' * (rules > 1)}")
    return notes


def _source_detail(pipeline: Pipeline) -> str:
    src = pipeline.source
    if src.kind == "kafka":
        return f"topic {src.options.get('topic', '?')}"
    if src.kind == "socket":
        return f"{src.options.get('host', '?')}:{src.options.get('port', '?')}"
    if src.kind == "delta":
        return f"lake table {src.table}"
    return src.path or ""


class _Ids:
    """Mermaid ids: kind prefix (a table and a view may share a name, and the prefix keeps
    Mermaid keywords such as `end` out), unsafe characters replaced, clashes numbered."""

    def __init__(self) -> None:
        self.taken: set[str] = set()

    def make(self, kind: str, name: str) -> str:
        base = f"{kind}_{_UNSAFE.sub('_', name)}"
        candidate, n = base, 2
        while candidate in self.taken:
            candidate, n = f"{base}_{n}", n + 1
        self.taken.add(candidate)
        return candidate


def graph_of(plan: Plan) -> Graph:
    """The graph of a checked plan (no Spark needed)."""
    pipeline = plan.pipeline
    ids = _Ids()
    nodes: list[Node] = []
    edges: list[Edge] = []
    # Names SQL can read (source, views, handlers) -> node id.
    readable: dict[str, str] = {}

    src = pipeline.source
    source_id = ids.make("source", src.view)
    detail = _source_detail(pipeline)
    nodes.append(
        Node(
            source_id, "source", src.view, (f"{src.view} ({src.kind})", *([detail] * bool(detail)))
        )
    )
    readable[src.view.lower()] = source_id

    delay_setting = pipeline.settings.get("watermark_delay", "").strip()
    for name in plan.order:
        if name in plan.steps:
            step = plan.steps[name]
            notes = _view_notes(step, delay_setting)
            node_id = ids.make("view", name)
            label = (name, " · ".join(notes)) if notes else (name,)
            stateful = step.distinct or bool(step.watermarks)
            nodes.append(Node(node_id, "view", name, label, stateful=stateful))
        else:
            spec, _ = plan.handlers[name]
            node_id = ids.make("handler", name)
            class_name = spec.class_path.rpartition(":")[2] or spec.class_path
            nodes.append(Node(node_id, "handler", name, (name, class_name), stateful=True))
        readable[name] = node_id
    for name in plan.order:
        inputs = (
            plan.steps[name].references if name in plan.steps else {plan.handlers[name][0].input}
        )
        for ref in sorted(inputs):
            edges.append(Edge(readable[ref.lower()], readable[name]))

    # Sinks: one node per table or topic, even when several queries write it.
    sink_ids: dict[tuple[str, str], str] = {}
    sink_queries: dict[str, list[str]] = {}
    groups: list[QueryGroup] = []
    for query in pipeline.queries:
        members: list[str] = []
        targets = [("table", t, v) for t, v in query.sinks.items()]
        targets += [("topic", t, v) for t, v in query.topics.items()]
        for kind, name, view in targets:
            key = (kind, name)
            if key not in sink_ids:
                sink_ids[key] = ids.make(kind, name)
                members.append(sink_ids[key])
            sink_queries.setdefault(sink_ids[key], []).append(query.name)
            edges.append(Edge(readable[view.lower()], sink_ids[key], query.name))
        # The rows a view's expectations drop go to the quarantine table this query writes.
        quarantine = plan.queries[query.name].quarantine
        for view in plan.queries[query.name].drops:
            target = sink_ids[("table", str(quarantine))]
            edges.append(Edge(readable[view], target, query.name, dropped=True))
        trigger = query.trigger or ""
        when = trigger if trigger.startswith(REAL_TIME) else f"every {trigger}"
        title = f"query {query.name}" + (f" · {when}" if trigger else "")
        groups.append(QueryGroup(query.name, title, tuple(members)))
    for (kind, name), node_id in sink_ids.items():
        if kind == "table":
            label: tuple[str, ...] = (f"{name} ({plan.tables[name].mode})",)
        else:
            label = (f"kafka: {name}",)
        queries = tuple(sink_queries[node_id])
        nodes.append(Node(node_id, kind, name, label, queries=queries))  # type: ignore[arg-type]
    return Graph(pipeline.name, tuple(nodes), tuple(edges), tuple(groups))


def pipeline_graph(pipeline: Pipeline) -> Graph:
    """Plan the pipeline (every problem a UserError, no JVM) and return its graph."""
    return graph_of(plan_pipeline(pipeline))


# Mermaid node shapes per kind: (opening, closing) around the quoted label.
_SHAPES: dict[str, tuple[str, str]] = {
    "source": ("([", "])"),
    "view": ("[", "]"),
    "handler": ("[[", "]]"),
    "table": ("[(", ")]"),
    "topic": ("[/", "/]"),
}

#: Fill and stroke per style class, shared with the Graphviz drawing so both look alike.
COLOURS: dict[str, tuple[str, str]] = {
    "source": ("#dbeafe", "#1d4ed8"),
    "view": ("#f8fafc", "#475569"),
    "stateful": ("#fef3c7", "#b45309"),
    "handler": ("#ede9fe", "#6d28d9"),
    "table": ("#dcfce7", "#15803d"),
    "topic": ("#fce7f3", "#be185d"),
}


def style_of(node: Node) -> str:
    """The colour class of a node: its kind, or `stateful` for a deduplicating or
    watermarked SQL view."""
    return "stateful" if node.kind == "view" and node.stateful else node.kind


def _mermaid_text(text: str) -> str:
    # Inside a quoted Mermaid label, quotes and angle brackets must be entity codes.
    for char, code in (("&", "#amp;"), ('"', "#quot;"), ("<", "#lt;"), (">", "#gt;")):
        text = text.replace(char, code)
    return text


def _mermaid_node(node: Node) -> str:
    opening, closing = _SHAPES[node.kind]
    label = "<br/>".join(_mermaid_text(line) for line in node.label)
    return f'{node.id}{opening}"{label}"{closing}'


def _mermaid_lines(graph: Graph) -> Iterator[str]:
    yield "flowchart LR"
    loose, boxes = graph.boxes()
    for node in loose:
        yield f"    {_mermaid_node(node)}"
    for group, members in boxes:
        yield f'    subgraph query_{_UNSAFE.sub("_", group.name)} ["{_mermaid_text(group.title)}"]'
        for node in members:
            yield f"        {_mermaid_node(node)}"
        yield "    end"
    for edge in graph.edges:
        yield f"    {edge.source} {'-. dropped .->' if edge.dropped else '-->'} {edge.target}"
    for style, (fill, stroke) in COLOURS.items():
        yield f"    classDef {style} fill:{fill},stroke:{stroke},color:#0f172a"
    for style in COLOURS:
        members = [n.id for n in graph.nodes if style_of(n) == style]
        if members:
            yield f"    class {','.join(members)} {style}"


def to_mermaid(graph: Graph) -> str:
    """Mermaid `flowchart LR` text: a subgraph per query around the tables and topics it
    writes; node shapes and colours per kind."""
    return "\n".join(_mermaid_lines(graph)) + "\n"
