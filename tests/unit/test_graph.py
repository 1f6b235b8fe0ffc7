"""`runner.py graph`: the pipeline graph from the plan (no Spark), its Mermaid text, its SVG
layout and the command line."""

from __future__ import annotations

import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from itertools import combinations
from pathlib import Path

import pytest

from engine.cli import main
from engine.definitions.pipeline import Registry
from engine.graph import Edge, Graph, Node, QueryGroup, pipeline_graph, to_mermaid
from engine.graph.svg import find_chromium, layout, to_svg

PROJECT = Path(__file__).resolve().parents[2]
PIPELINES = ["server_logs", "user_activity", "sensor_cep", "order_status", "customer_spend"]
SVG = "{http://www.w3.org/2000/svg}"

EXPECTED_EDGES = {
    "server_logs": {
        ("source:raw_logs", "view:parsed_logs"),
        ("view:parsed_logs", "view:log_lines"),
        ("view:parsed_logs", "view:quarantine"),
        ("view:log_lines", "view:events"),
        ("view:events", "handler:session_updates"),
        ("view:events", "view:purchases"),
        ("view:events", "handler:cart_updates"),
        ("view:events", "table:events"),
        ("view:quarantine", "table:quarantine"),
        ("view:purchases", "table:purchases"),
        ("handler:session_updates", "table:sessions"),
        ("handler:cart_updates", "table:carts"),
    },
    "user_activity": {
        ("source:raw_activity", "view:activity_records"),
        ("view:activity_records", "view:activity_events"),
        ("view:activity_records", "view:quarantine"),
        ("view:activity_events", "view:user_event_counts"),
        ("view:activity_events", "handler:activity_span_updates"),
        ("handler:activity_span_updates", "table:activity_spans"),
        ("view:user_event_counts", "table:user_event_counts"),
        ("view:quarantine", "table:quarantine"),
    },
    "sensor_cep": {
        ("source:raw_readings", "view:sensor_readings"),
        ("view:sensor_readings", "view:readings"),
        ("view:sensor_readings", "view:anomalies"),
        ("view:sensor_readings", "view:quarantine"),
        ("view:readings", "view:windowed_readings"),
        ("view:windowed_readings", "handler:window_samples"),
        ("handler:window_samples", "view:sensor_samples"),
        ("view:anomalies", "view:anomaly_alerts"),
        ("view:sensor_samples", "table:sensor_samples"),
        ("view:quarantine", "table:quarantine"),
        ("view:anomalies", "table:sensor_anomalies"),
        ("view:anomaly_alerts", "topic:sensor-anomalies"),
    },
    "order_status": {
        ("source:raw_orders", "view:orders"),
        ("view:orders", "view:order_counts"),
        ("view:orders", "view:order_totals"),
        ("view:orders", "view:quarantine"),
        ("view:order_counts", "table:order_counts"),
        ("view:order_totals", "table:order_totals"),
        ("view:quarantine", "table:quarantine"),
    },
    "customer_spend": {
        ("source:purchase_rows", "view:customer_spend"),
        ("view:customer_spend", "table:customer_spend"),
    },
}


@pytest.fixture(scope="module")
def graphs() -> dict[str, Graph]:
    registry = Registry()
    return {name: pipeline_graph(registry.get(name)) for name in PIPELINES}


@pytest.mark.parametrize("name", PIPELINES)
def test_edges_follow_sql_handlers_and_sinks(graphs, name):
    graph = graphs[name]
    assert graph.named_edges() == EXPECTED_EDGES[name]
    named = {f"{n.kind}:{n.name}" for n in graph.nodes}
    assert named == {end for edge in EXPECTED_EDGES[name] for end in edge}
    assert len({n.id for n in graph.nodes}) == len(graph.nodes)


def test_server_logs_labels(graphs):
    graph = graphs["server_logs"]
    assert graph.find("source", "raw_logs").label == ("raw_logs (files)", "data/server_logs")
    log_lines = graph.find("view", "log_lines")
    assert log_lines.label == ("log_lines", "dedup · watermark 1 minute")
    assert log_lines.stateful
    assert not graph.find("view", "events").stateful
    assert graph.find("handler", "session_updates").label == ("session_updates", "SessionHandler")
    assert graph.find("table", "sessions").label == ("sessions (merge)",)
    assert graph.find("table", "events").queries == ("main",)
    # A table and a view named alike are distinct nodes.
    assert graph.find("table", "events").id != graph.find("view", "events").id


def test_other_labels(graphs):
    sensor = graphs["sensor_cep"]
    assert sensor.find("source", "raw_readings").label[0] == "raw_readings (kafka)"
    assert sensor.find("topic", "sensor-anomalies").label == ("kafka: sensor-anomalies",)
    groups = {g.name: g.members for g in sensor.queries}
    assert sensor.find("topic", "sensor-anomalies").id in groups["alerts"]
    titles = {g.name: g.title for g in sensor.queries}
    assert titles["alerts"] == "query alerts · real-time"
    activity = graphs["user_activity"].find("view", "activity_events")
    assert activity.label[1] == "dedup on user, event_time · watermark 5 seconds"
    assert graphs["order_status"].find("view", "order_counts").label[1] == "watermark 10 seconds"
    spend = graphs["customer_spend"].find("source", "purchase_rows")
    assert spend.label == ("purchase_rows (delta)", "lake table purchases")


def test_watermark_setting_shows_in_label():
    pipeline = Registry().get("server_logs").with_settings({"watermark_delay": "2 minutes"})
    label = pipeline_graph(pipeline).find("view", "log_lines").label
    assert label[1] == "dedup · watermark 2 minutes"


_NODE_LINE = re.compile(
    r"^\s*([A-Za-z][A-Za-z0-9_]*)(\(\[|\[\[|\[\(|\[/|\[)\"[^\"]*\"(\]\)|\]\]|\)\]|/\]|\])$"
)
_EDGE_LINE = re.compile(r"^\s*([A-Za-z][A-Za-z0-9_]*) --> ([A-Za-z][A-Za-z0-9_]*)$")


@pytest.mark.parametrize("name", PIPELINES)
def test_mermaid_is_structurally_valid(graphs, name):
    text = to_mermaid(graphs[name])
    lines = text.splitlines()
    assert lines[0] == "flowchart LR"
    declared, edges, depth = set(), [], 0
    for line in lines[1:]:
        if node := _NODE_LINE.match(line):
            declared.add(node.group(1))
        elif edge := _EDGE_LINE.match(line):
            edges.append(edge.groups())
        elif line.strip().startswith("subgraph "):
            depth += 1
        elif line.strip() == "end":
            depth -= 1
        else:
            assert re.match(r"^\s*(classDef|class) ", line), line
        assert depth in (0, 1)
    assert depth == 0
    assert declared == {n.id for n in graphs[name].nodes}
    assert edges and all(a in declared and b in declared for a, b in edges)
    assert len(edges) == len(graphs[name].edges)


def _boxes(svg_text: str) -> list[tuple[float, float, float, float]]:
    root = ET.fromstring(svg_text.encode())
    groups = [g for g in root.iter(f"{SVG}g") if "node" in g.get("class", "").split()]
    return [tuple(float(g.get(f"data-{k}")) for k in ("x", "y", "width", "height")) for g in groups]


def _overlap(a, b) -> bool:
    ax, ay, aw, ah = a
    bx, by, bw, bh = b
    return ax < bx + bw and bx < ax + aw and ay < by + bh and by < ay + ah


@pytest.mark.parametrize("name", PIPELINES)
def test_svg_is_well_formed_without_overlaps(graphs, name):
    graph = graphs[name]
    svg = to_svg(graph)
    root = ET.fromstring(svg.encode())
    assert root.tag == f"{SVG}svg"
    boxes = _boxes(svg)
    assert len(boxes) == len(graph.nodes)
    for a, b in combinations(boxes, 2):
        assert not _overlap(a, b), (a, b)
    width, height = float(root.get("width")), float(root.get("height"))
    assert all(x >= 0 and y >= 0 and x + w <= width and y + h <= height for x, y, w, h in boxes)
    paths = [p for p in root.iter(f"{SVG}path") if p.get("class") == "edge"]
    assert len(paths) == len(graph.edges)


def test_long_edges_pass_between_boxes():
    # d reads s directly and through a, b, c: s -> d crosses the columns of a, b and c.
    def view(i: str) -> Node:
        return Node(i, "view", i, (i,))

    nodes = (Node("s", "source", "s", ("s",)), *map(view, "abcd"))
    edges = tuple(Edge(a, b) for a, b in ["sa", "ab", "bc", "cd", "sd", "sc"])
    graph = Graph("synthetic", nodes, edges, (QueryGroup("q", "query q", ()),))
    lay = layout(graph)
    route = next(r for r in lay.routes if (r.edge.source, r.edge.target) == ("s", "d"))
    assert len(route.points) == 2 + 2 * 3  # enters and leaves each column it crosses
    for (x1, y), (x2, _) in zip(route.points[1:-1:2], route.points[2:-1:2], strict=True):
        for box in lay.boxes.values():
            crosses_column = box.x < x2 and x1 < box.x + box.width
            assert not (crosses_column and box.y <= y <= box.y + box.height)
    for a, b in combinations(lay.boxes.values(), 2):
        assert not _overlap((a.x, a.y, a.width, a.height), (b.x, b.y, b.width, b.height))


def test_cli_prints_mermaid():
    done = subprocess.run(
        [sys.executable, "runner.py", "graph", "server_logs"],
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("flowchart LR\n")
    assert "view_events --> handler_session_updates" in done.stdout


def test_cli_writes_svg_and_mermaid(tmp_path, capsys):
    assert main(["graph", "sensor_cep", "--out", str(tmp_path / "g.svg")]) == 0
    assert ET.parse(tmp_path / "g.svg").getroot().tag == f"{SVG}svg"
    assert main(["graph", "sensor_cep", "--out", str(tmp_path / "g.mmd")]) == 0
    assert (tmp_path / "g.mmd").read_text().startswith("flowchart LR\n")
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["graph", "server_logs", "--out", "x.txt"], "--out x.txt: unknown format"),
        (["graph", "nope"], "unknown pipeline 'nope'"),
    ],
)
def test_cli_errors_are_one_line(tmp_path, capsys, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    if "--pipelines" not in args:
        args = ["--pipelines", str(PROJECT / "pipelines"), *args]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err
    assert not (tmp_path / "x.txt").exists()


@pytest.mark.skipif(find_chromium() is None, reason="needs Chromium to render the PNG")
def test_cli_writes_png(tmp_path):
    out = tmp_path / "g.png"
    assert main(["graph", "server_logs", "--out", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
