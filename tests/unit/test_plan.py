"""Planning a pipeline without Spark: order, handlers, tables, and the checks on queries."""

from __future__ import annotations

from dataclasses import replace

import pytest

from engine.build import plan_pipeline
from engine.errors import UserError
from engine.pipeline import QuerySpec, Registry


@pytest.fixture
def pipeline():
    return Registry().get("server_logs")


def test_server_logs_plan(pipeline):
    plan = plan_pipeline(pipeline)
    order = list(plan.order)
    assert order.index("parsed_logs") < order.index("log_lines") < order.index("events")
    assert order.index("cart_changes") < order.index("cart_updates")
    assert set(plan.handlers) == {"session_updates", "cart_updates"}
    assert plan.steps["log_lines"].distinct


@pytest.mark.parametrize(
    ("sinks", "message"),
    [
        ({"events": "events", "purchases": "purchases"}, "stateful step 'log_lines'"),
        ({"sessions": "session_updates", "carts": "cart_updates"}, "stateful step 'log_lines'"),
        ({"nope": "events"}, "unknown table 'nope'"),
        ({"events": "no_view"}, "reads unknown view 'no_view'"),
    ],
)
def test_bad_queries_are_refused(pipeline, sinks, message):
    bad = replace(pipeline, queries=(QuerySpec("main", sinks),))
    with pytest.raises(UserError, match=message):
        plan_pipeline(bad)


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
    ],
)
def test_query_outputs_are_checked(tmp_path, query, message):
    spec = (Registry().folder / "sensor_cep.yaml").read_text()
    head = spec[: spec.index("queries:")]
    (tmp_path / "sensor_cep.yaml").write_text(f"{head}queries:\n{query}")
    with pytest.raises(UserError, match=message):
        Registry(tmp_path).get("sensor_cep")


def test_a_topics_only_query_may_run_in_real_time():
    from engine.run import _trigger

    alerts = {q.name: q for q in Registry().get("sensor_cep").queries}["alerts"]
    assert not alerts.sinks and alerts.topics == {"sensor-anomalies": "anomaly_alerts"}
    assert _trigger(alerts, once=False, real_time=True) == {"realTime": "1 minute"}
    # Without Spark's Kafka source (Python connector, files): the next batch at once.
    assert _trigger(alerts, once=False) == {"processingTime": "0 seconds"}
    assert _trigger(alerts, once=True, real_time=True) == {"availableNow": True}
    five = replace(alerts, trigger="real-time 5 minutes")
    assert _trigger(five, once=False, real_time=True) == {"realTime": "5 minutes"}
