"""`runner.py graph`: the pipeline graph from the plan (no Spark), its Mermaid text, its
Graphviz DOT text and drawings (a real `dot`, which `make setup` installs) and the command
line."""

from __future__ import annotations

import re
import struct
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from engine.commands import main
from engine.definitions.pipeline import Registry
from engine.graph import Edge, Graph, Node, QueryGroup, pipeline_graph, to_mermaid
from engine.graph.dot import render, to_dot

PROJECT = Path(__file__).resolve().parents[2]
PIPELINES = ["server_logs", "user_activity", "sensor_cep", "order_status", "customer_spend"]
SVG = "{http://www.w3.org/2000/svg}"

EXPECTED_EDGES = {
    "server_logs": {
        ("source:raw_logs", "view:parsed_logs"),
        ("view:parsed_logs", "view:checked_lines"),
        ("view:checked_lines", "view:log_lines"),
        ("view:checked_lines", "table:quarantine"),
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
        ("view:sensor_readings", "view:valid_readings"),
        ("view:valid_readings", "view:readings"),
        ("view:valid_readings", "view:anomalies"),
        ("view:valid_readings", "table:quarantine"),
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
    checked = graph.find("view", "checked_lines")
    assert (checked.label, checked.stateful) == (("checked_lines", "3 expectations"), False)
    (dropped,) = [e for e in graph.edges if e.dropped]
    assert (dropped.source, dropped.target) == (checked.id, graph.find("table", "quarantine").id)
    assert f"{checked.id} -. dropped .-> {dropped.target}" in to_mermaid(graph)
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
# A plain edge, or the dashed one of rows the expectations drop.
_EDGE_LINE = re.compile(
    r"^\s*([A-Za-z][A-Za-z0-9_]*) (?:-->|-\. dropped \.->) ([A-Za-z][A-Za-z0-9_]*)$"
)


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


def _dot_statements(text: str) -> dict[str, str]:
    """Node id -> its DOT statement line, and the name of the cluster around it (if any)."""
    found, cluster = {}, ""
    for line in text.splitlines():
        if m := re.match(r'^\s*subgraph "(cluster_[^"]+)" \{$', line):
            cluster = m.group(1)
        elif line.strip() == "}":
            cluster = ""
        elif m := re.match(r'^\s*"([A-Za-z0-9_]+)" \[(.*)\]$', line):
            found[m.group(1)] = f"{cluster} {m.group(2)}".strip()
    return found


#: (pipeline, node id, fragments its DOT statement must hold): shapes, colours, labels, clusters.
DOT_NODES = [
    (
        "server_logs",
        "source_raw_logs",
        [
            "shape=box",
            'style="rounded,filled"',
            'fillcolor="#dbeafe"',
            "<B>raw_logs (files)</B>",
            ">data/server_logs<",
        ],
    ),
    (
        "server_logs",
        "view_parsed_logs",
        ["shape=box", 'style="filled"', 'fillcolor="#f8fafc"', "<B>parsed_logs</B>"],
    ),
    (
        "server_logs",
        "view_log_lines",
        [
            "shape=box",
            'fillcolor="#fef3c7"',
            'class="view stateful"',
            "<B>log_lines</B>",
            ">dedup · watermark 1 minute<",
        ],
    ),
    (
        "server_logs",
        "handler_session_updates",
        [
            "shape=box",
            "peripheries=2",
            'fillcolor="#ede9fe"',
            "<B>session_updates</B>",
            ">SessionHandler<",
        ],
    ),
    (
        "server_logs",
        "table_sessions",
        ["cluster_query_main ", "shape=cylinder", 'fillcolor="#dcfce7"', "<B>sessions (merge)</B>"],
    ),
    (
        "server_logs",
        "table_events",
        ["cluster_query_main ", "shape=cylinder", "<B>events (append)</B>"],
    ),
    (
        "sensor_cep",
        "source_raw_readings",
        ["<B>raw_readings (kafka)</B>", ">topic sensor-readings<"],
    ),
    (
        "sensor_cep",
        "topic_sensor_anomalies",
        [
            "cluster_query_alerts ",
            "shape=polygon",
            "sides=4",
            "skew=0.25",
            'fillcolor="#fce7f3"',
            "<B>kafka: sensor-anomalies</B>",
        ],
    ),
    (
        "user_activity",
        "view_activity_events",
        [">dedup on user, event_time · watermark 5 seconds<"],
    ),
    (
        "user_activity",
        "table_user_event_counts",
        ["cluster_query_main ", "shape=cylinder", "user_event_counts (add)"],
    ),
]


@pytest.mark.parametrize(("name", "node_id", "fragments"), DOT_NODES)
def test_dot_nodes(graphs, name, node_id, fragments):
    statement = _dot_statements(to_dot(graphs[name]))[node_id]
    for fragment in fragments:
        assert fragment in statement, (fragment, statement)


@pytest.mark.parametrize("name", PIPELINES)
def test_dot_declares_every_node_and_edge(graphs, name):
    graph = graphs[name]
    text = to_dot(graph)
    assert text.startswith(f'digraph "{name}" {{\n') and text.endswith("}\n")
    assert "rankdir=LR" in text and f"<B>pipeline {name}</B>" in text
    assert set(_dot_statements(text)) == {n.id for n in graph.nodes}
    edges = re.findall(
        r'^\s*"(\w+)" -> "(\w+)"(?: \[style=dashed, label=dropped.*\])?$', text, re.M
    )
    assert sorted(edges) == sorted((e.source, e.target) for e in graph.edges)
    for group in graph.queries:
        assert f"<I>{group.title}</I>" in text
    # The legend shows the colours the drawing uses, and only those.
    assert ("Kafka topic" in text) == any(n.kind == "topic" for n in graph.nodes)


def _svg_texts(svg: bytes) -> list[str]:
    root = ET.fromstring(svg)
    assert root.tag == f"{SVG}svg"
    return ["".join(t.itertext()) for t in root.iter(f"{SVG}text")]


def test_dot_escapes_labels():
    # Names as odd as a yaml allows: quotes, angle brackets, ampersands, backslashes.
    odd = 'a "b" <c> & d\\e'
    nodes = (
        Node("s", "source", odd, (f"{odd} (files)", "x<y>&z")),
        Node("v", "view", odd, (odd, "dedup · watermark 1 minute"), stateful=True),
        Node("t", "table", odd, (f"{odd} (append)",), queries=("q",)),
    )
    edges = (Edge("s", "v"), Edge("v", "t", "q"))
    graph = Graph('p "<&>"', nodes, edges, (QueryGroup("q", 'query "q" <&>', ("t",)),))
    texts = _svg_texts(render(to_dot(graph), "svg"))
    for expected in (f"{odd} (files)", "x<y>&z", odd, f"{odd} (append)", 'query "q" <&>'):
        assert expected in texts
    assert 'pipeline p "<&>"' in texts


@pytest.mark.parametrize("name", PIPELINES)
def test_dot_renders_svg_and_png(graphs, name, tmp_path):
    graph = graphs[name]
    svg, png = tmp_path / f"{name}.svg", tmp_path / f"{name}.png"
    assert main(["graph", name, "--out", str(svg)]) == 0
    assert main(["graph", name, "--out", str(png)]) == 0
    texts = _svg_texts(svg.read_bytes())
    for node in graph.nodes:
        assert node.label[0] in texts
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    assert 400 <= width <= 4000 and 150 <= height <= 1500, (width, height)


def test_missing_dot_is_a_one_line_error(tmp_path, capsys, monkeypatch):
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    out = tmp_path / "g.svg"
    assert main(["graph", "server_logs", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert f"--out {out}: drawing needs Graphviz's `dot` program" in err
    assert "make setup" in err and "apt-get install graphviz" in err
    assert not out.exists()
    # Mermaid needs no Graphviz.
    assert main(["graph", "server_logs", "--out", str(tmp_path / "g.mmd")]) == 0


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


def test_sink_of_several_queries_names_them():
    nodes = (
        Node("s", "source", "s", ("s (files)",)),
        Node("t", "table", "t", ("t (append)",), queries=("q", "r")),
    )
    edges = (Edge("s", "t", "q"), Edge("s", "t", "r"))
    groups = (QueryGroup("q", "query q", ("t",)), QueryGroup("r", "query r", ()))
    assert "queries q, r" in _svg_texts(render(to_dot(Graph("p", nodes, edges, groups)), "svg"))
