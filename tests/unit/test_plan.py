"""Planning a pipeline without Spark: order, handlers, tables, and the checks on queries."""

from __future__ import annotations

from dataclasses import replace

import pytest

from engine.definitions.pipeline import QuerySpec, Registry
from engine.errors import UserError
from engine.plan import plan_pipeline
from engine.plan.queries import StateCall, StreamOutput
from tests.conftest import copy_project, edit


@pytest.fixture
def pipeline():
    return Registry().get("server_logs")


def test_server_logs_plan(pipeline):
    plan = plan_pipeline(pipeline)
    order = list(plan.order)
    assert order.index("parsed_logs") < order.index("log_lines") < order.index("events")
    assert order.index("events") < order.index("cart_updates")
    assert set(plan.handlers) == {"session_updates", "cart_updates"}
    assert plan.steps["log_lines"].distinct


def test_one_query_reads_server_logs_once(pipeline):
    """Every table from one query: both handlers in one state-store call that also passes the
    deduplicated events on; the parsed lines, from which the batch takes the quarantine and the
    lines the expectations drop; purchases computed on each batch."""
    (query,) = plan_pipeline(pipeline).queries.values()
    group = StateCall("events", ("cart_updates", "session_updates"))
    assert query.outputs == (StreamOutput(handlers=group), StreamOutput(view="parsed_logs"))
    assert query.batch_steps == ("checked_lines__dropped", "purchases", "quarantine")


@pytest.mark.parametrize(
    ("name", "query", "outputs", "batch"),
    [
        # The handler's input is not read on the batch: no passthrough. The lines
        # checked_lines' expectations drop are judged again on the batch, from parsed_logs.
        (
            "server_logs",
            QuerySpec("q", {"sessions": "session_updates", "quarantine": "quarantine"}),
            (
                StreamOutput(handlers=StateCall("events", ("session_updates",)), passthrough=False),
                StreamOutput(view="parsed_logs"),
            ),
            ("checked_lines__dropped", "quarantine"),
        ),
        # Stateless tables share one output: the latest view they all read. The readings
        # valid_readings drops are judged on the batch, right after it.
        (
            "sensor_cep",
            QuerySpec("q", {"quarantine": "quarantine", "sensor_anomalies": "anomalies"}),
            (StreamOutput(view="sensor_readings"),),
            ("quarantine", "valid_readings", "valid_readings__dropped", "anomalies"),
        ),
        # A deduplicated view without handlers below it is an output itself.
        (
            "server_logs",
            QuerySpec("q", {"events": "events", "quarantine": "quarantine"}),
            (StreamOutput(view="events"), StreamOutput(view="parsed_logs")),
            ("checked_lines__dropped", "quarantine"),
        ),
    ],
)
def test_derived_outputs(name, query, outputs, batch):
    pipeline = replace(Registry().get(name), queries=(query,))
    derived = plan_pipeline(pipeline).queries["q"]
    assert (derived.outputs, derived.batch_steps) == (outputs, batch)


@pytest.mark.parametrize(
    ("name", "sinks", "message"),
    [
        ("server_logs", {"nope": "events"}, "unknown table 'nope'"),
        ("server_logs", {"events": "no_view"}, "reads unknown view 'no_view'"),
    ],
)
def test_bad_queries_are_refused(name, sinks, message):
    bad = replace(Registry().get(name), queries=(QuerySpec("main", sinks),))
    with pytest.raises(UserError, match=message):
        plan_pipeline(bad)


def test_an_aggregation_without_a_watermark_needs_update_mode():
    """Spark refuses it only when the query starts, after --full-refresh emptied the tables."""
    pipeline = Registry().get("order_status")
    (orders,) = pipeline.queries
    plan_pipeline(pipeline)
    windowed = replace(orders, output_mode="append", sinks={"order_counts": "order_counts"})
    plan_pipeline(replace(pipeline, queries=(windowed,)))  # watermarked: append closes windows
    appended = replace(pipeline, queries=(replace(orders, output_mode="append"),))
    message = (
        r"order_totals.sql: aggregation order_totals has no WATERMARK upstream, so query orders "
        r"cannot run in append mode .* set `output_mode: update` for query orders"
    )
    with pytest.raises(UserError, match=message):
        plan_pipeline(appended)


def test_settings_are_checked(pipeline):
    with pytest.raises(UserError, match="--conf nope"):
        pipeline.with_settings({"nope": "1"})
    p = pipeline.with_settings({"source.maxFilesPerTrigger": "1", "session_timeout": "1 minute"})
    assert p.source.options["maxFilesPerTrigger"] == "1"
    assert plan_pipeline(p).handlers["session_updates"][1].gap.total_seconds() == 60


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("  q: {trigger: 5 seconds}\n", "query 'q' writes nothing"),
        (
            "  q: {trigger: real-time, sinks: {quarantine: quarantine}}\n",
            "trigger real-time is for a query that writes only topics",
        ),
        (
            "  q: {trigger: 5 secnds, sinks: {quarantine: quarantine}}\n",
            r"query 'q': trigger: not a duration: '5 secnds'",
        ),
    ],
)
def test_query_outputs_are_checked(tmp_path, query, message):
    spec = (Registry().folder / "sensor_cep.yaml").read_text()
    head = spec[: spec.index("queries:")]
    (tmp_path / "sensor_cep.yaml").write_text(f"{head}queries:\n{query}")
    with pytest.raises(UserError, match=message):
        Registry(tmp_path).get("sensor_cep")


def test_a_topics_only_query_may_run_in_real_time():
    from engine.runtime.query_control import spark_trigger

    alerts = {q.name: q for q in Registry().get("sensor_cep").queries}["alerts"]
    assert not alerts.sinks and alerts.topics == {"sensor-anomalies": "anomaly_alerts"}
    assert spark_trigger(alerts, once=False, real_time=True) == {"realTime": "60000 milliseconds"}
    # Without Spark's Kafka source (Python connector, files): the next batch at once.
    assert spark_trigger(alerts, once=False) == {"processingTime": "0 seconds"}
    assert spark_trigger(alerts, once=True, real_time=True) == {"availableNow": True}
    five = replace(alerts, trigger="real-time 5 minutes")
    assert spark_trigger(five, once=False, real_time=True) == {"realTime": "300000 milliseconds"}


@pytest.mark.parametrize(
    ("trigger", "spark"),
    [
        # Spark's triggers take neither a short unit nor a fraction: `30 s` passed `lint` and
        # then stopped the run (INVALID_INTERVAL_FORMAT); Spark is given whole milliseconds
        ("5 seconds", {"processingTime": "5000 milliseconds"}),
        ("30 s", {"processingTime": "30000 milliseconds"}),
        ("1.5 hours", {"processingTime": "5400000 milliseconds"}),
        ("INTERVAL '2' MINUTE", {"processingTime": "120000 milliseconds"}),
        ("real-time 30 s", {"realTime": "30000 milliseconds"}),
    ],
)
def test_a_trigger_reaches_spark_in_a_form_it_parses(trigger, spark):
    from engine.runtime.query_control import spark_trigger

    query = {q.name: q for q in Registry().get("sensor_cep").queries}["alerts"]
    assert spark_trigger(replace(query, trigger=trigger), once=False, real_time=True) == spark


def test_a_real_time_trigger_with_a_bad_duration_is_refused(tmp_path):
    spec = (Registry().folder / "sensor_cep.yaml").read_text()
    spec = spec.replace("trigger: real-time", "trigger: real-time soon")
    assert "real-time soon" in spec
    (tmp_path / "sensor_cep.yaml").write_text(spec)
    with pytest.raises(UserError, match="query 'alerts': trigger: not a duration: 'soon'"):
        Registry(tmp_path).get("sensor_cep")


@pytest.mark.parametrize(
    ("queries", "expected"),
    [
        # No queries: one derived query, main, writes every table.
        ("", {"main": (None, ["events", "quarantine"])}),
        # main sets how the derived query runs.
        (
            "queries:\n  main: {trigger: 5 seconds}\n",
            {"main": ("5 seconds", ["events", "quarantine"])},
        ),
        # An entry with sinks takes those tables into a query of its own.
        (
            "queries:\n  q: {sinks: {quarantine: quarantine}}\n",
            {"main": (None, ["events"]), "q": (None, ["quarantine"])},
        ),
    ],
)
def test_queries_are_optional_overrides(tmp_path, queries, expected):
    spec = (Registry().folder / "server_logs.yaml").read_text()
    head = spec[: spec.index("tables:")]
    tables = "tables:\n  events: events\n  quarantine: quarantine\n"
    (tmp_path / "server_logs.yaml").write_text(head + tables + queries + "settings: {}\n")
    loaded = Registry(tmp_path).get("server_logs")
    assert {q.name: (q.trigger, list(q.sinks)) for q in loaded.queries} == expected


def test_sql_a_stream_would_refuse_stops_the_run_too(tmp_path):
    """A view below the stateful steps runs on each micro-batch, where Spark checks nothing:
    ORDER BY ... LIMIT 2 there gave two rows a batch. The plan, which `run` stops on, refuses."""
    project = copy_project(tmp_path / "project")
    edit(project / "sql" / "sensor_cep" / "anomalies.sql", "WHERE is_anomalous", "LIMIT 2")
    with pytest.raises(UserError, match=r"anomalies.sql:5:7: LIMIT in a streaming view"):
        plan_pipeline(Registry(project / "pipelines").get("sensor_cep"))
