"""sensor_cep on a hand-made input with known windows, from files and from a real broker
(Apache Kafka): Spark's Kafka connector by default, the Python source in one scenario."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from deltalake import DeltaTable

from engine.definitions.pipeline import Registry
from engine.errors import KafkaUnavailable, UserError
from engine.lake.batch_records import run_records
from engine.plan import plan_pipeline
from engine.quality import validate_lake
from engine.runtime.run import RunOptions, RunResult, run_pipeline
from tests.conftest import PROJECT, consume, copy_project, edit, produce, read_table, staged

SCENARIO = PROJECT / "tests" / "data" / "sensor_cep_scenario"
ONE_FILE_PER_BATCH = {"source.maxFilesPerTrigger": "1"}

# (window start, device, reading) of every sample, worked out by hand from the scenario files.
# Batch 3's readings at 10:00:50 and 10:00:55 are behind the watermark (10:01:15) and dropped;
# the window from 10:02:30 and later ones are still open at the end (watermark 10:03:10).
EXPECTED_SAMPLES = sorted(
    [
        ("09:59:30", "377412", 10.0),
        ("09:59:30", "377413", 20.0),
        ("09:59:30", "377412", -5.0),  # anomaly: always kept
        ("09:59:30", "377413", 30.0),
        ("10:00:00", "377412", 10.0),  # first of 5 normal readings
        ("10:00:00", "377412", -5.0),
        ("10:00:00", "377413", 30.0),  # middle: index 5 // 2
        ("10:00:00", "377412", 40.0),  # last
        ("10:00:30", "377413", 50.0),
        ("10:00:30", "377412", 40.0),
        ("10:00:30", "377412", 60.0),
        ("10:01:00", "377412", 60.0),
        ("10:01:00", "377413", 70.0),  # middle and last of two: once
        ("10:01:30", "377413", 70.0),
        ("10:02:00", "377413", -1.0),  # only an anomaly
    ]
)
# The same input grouped per window and device (the one-line SQL change).
EXPECTED_PER_DEVICE = sorted(
    [
        ("09:59:30", "377412", 10.0),
        ("09:59:30", "377412", -5.0),
        ("09:59:30", "377413", 20.0),
        ("09:59:30", "377413", 30.0),
        ("10:00:00", "377412", 10.0),
        ("10:00:00", "377412", -5.0),
        ("10:00:00", "377412", 40.0),
        ("10:00:00", "377413", 20.0),
        ("10:00:00", "377413", 30.0),
        ("10:00:00", "377413", 50.0),
        ("10:00:30", "377412", 40.0),
        ("10:00:30", "377412", 60.0),
        ("10:00:30", "377413", 50.0),
        ("10:01:00", "377412", 60.0),
        ("10:01:00", "377413", 70.0),
        ("10:01:30", "377413", 70.0),
        ("10:02:00", "377413", -1.0),
    ]
)
# Anomalies are alerted as they arrive, late or not.
EXPECTED_ANOMALIES = sorted(
    [("377412", -5.0, "10:00:20"), ("377413", -1.0, "10:02:30"), ("377412", -7.0, "10:00:55")]
)


def samples(lake: Path) -> list[tuple[str, str, float]]:
    rows = read_table(lake, "sensor_samples")
    return sorted(
        (r["window_start"].strftime("%H:%M:%S"), r["device_id"], r["sensor_freq"]) for r in rows
    )


def anomalies(lake: Path) -> list[tuple[str, float, str]]:
    rows = read_table(lake, "sensor_anomalies")
    return sorted(
        (r["device_id"], r["sensor_freq"], r["event_time"].strftime("%H:%M:%S")) for r in rows
    )


def alerts(servers: str) -> list[tuple[str, float, str]]:
    found = []
    for m in consume(servers, "sensor-anomalies", expect=len(EXPECTED_ANOMALIES)):
        doc = json.loads(m.value())
        assert m.key().decode() == doc["device_id"]
        found.append((doc["device_id"], doc["sensor_freq"], doc["event_time"][11:19]))
    return sorted(found)


def run(spark, lake: Path, overrides: dict[str, str], *, registry: Registry | None = None,
        input_path: Path | None = SCENARIO) -> RunResult:  # fmt: skip
    pipeline = (registry or Registry()).get("sensor_cep").with_settings(overrides)
    if input_path is not None:
        input_path = staged(input_path, lake.parent / "in")
    opts = RunOptions(
        lake=lake, once=True, input_path=str(input_path) if input_path else None, quiet=True
    )
    return run_pipeline(spark, plan_pipeline(pipeline, once=True), opts)


def test_files_give_the_known_samples_anomalies_and_accounting(spark, broker, tmp_path):
    lake = tmp_path / "lake"
    kafka = {"kafka.bootstrap.servers": broker.servers}
    result = run(spark, lake, {**ONE_FILE_PER_BATCH, **kafka})
    assert samples(lake) == EXPECTED_SAMPLES
    assert anomalies(lake) == EXPECTED_ANOMALIES
    assert alerts(broker.servers) == EXPECTED_ANOMALIES
    # Every input line is a reading, a quarantine row, a duplicate or late: none lost silently.
    totals = result.listener.totals["main"]
    assert (totals.source_rows, totals.accepted, totals.duplicates, totals.late) == (15, 10, 1, 2)
    reasons = sorted(r["reason"] for r in read_table(lake, "quarantine"))
    assert reasons == ["malformed JSON", "unparseable event_time: yesterday"]
    rows = read_table(lake, "sensor_samples")
    assert {str(r["part_date"]) for r in rows} == {"2023-04-12"}
    assert {(r["window_end"] - r["window_start"]).seconds for r in rows} == {60}
    assert sum(r["is_anomalous"] for r in rows) == 3
    checked = validate_lake(lake, tmp_path / "report", ["sensor_samples", "sensor_anomalies"])
    assert checked.passed and len(checked.results) == 2


def test_grouping_per_device_is_a_one_line_sql_change(spark, broker, tmp_path):
    copy_project(tmp_path)
    edit(
        tmp_path / "sql" / "sensor_cep" / "windowed_readings.sql",
        "  CAST(w.start AS STRING) AS sample_group,\n",
        "  concat_ws('/', w.start, device_id) AS sample_group,\n",
    )
    lake = tmp_path / "lake"
    kafka = {"kafka.bootstrap.servers": broker.servers}
    run(spark, lake, {**ONE_FILE_PER_BATCH, **kafka}, registry=Registry(tmp_path / "pipelines"))
    assert samples(lake) == EXPECTED_PER_DEVICE


def test_a_rule_after_the_handler_that_is_not_true_or_false_is_named_before_the_run(
    spark, broker, tmp_path
):
    # sensor_samples reads the handler's rows, so it is computed on each batch only: its rules
    # are checked once, as `check` runs the batch steps on no rows, not again per batch.
    copy_project(tmp_path)
    path = tmp_path / "sql" / "sensor_cep" / "sensor_samples.sql"
    edit(path, "CREATE OR", "-- CONSTRAINT has_device EXPECT (device_id)\nCREATE OR")
    lake = tmp_path / "lake"
    kafka = {"kafka.bootstrap.servers": broker.servers}
    with pytest.raises(UserError) as caught:
        run(spark, lake, kafka, registry=Registry(tmp_path / "pipelines"))
    assert str(caught.value).endswith(
        f"{path}:2: expectation has_device: EXPECT (device_id) is string, "
        "not a condition (true or false)"
    )
    assert not list(lake.glob("_checkpoints/*/*/commits/*"))  # no batch of any query


@pytest.mark.parametrize("connector", ["native", "python"])
def test_kafka_source_gives_the_same_tables(spark, broker, tmp_path, connector):
    from engine.sinks.kafka import SparkTopicSink

    lake = tmp_path / "lake"
    kafka = {"kafka.bootstrap.servers": broker.servers, "source.connector": connector}
    # One run per file: each run reads what the topic holds, as one batch.
    for part in sorted(SCENARIO.glob("part-*.json")):
        produce(broker.servers, "sensor-readings", part.read_text().splitlines())
        result = run(spark, lake, kafka, input_path=None)
        assert result.listener.totals["main"].batches >= 1
        # Spark's Kafka sink writes the alerts, or confluent-kafka's producer.
        alerts_sink = result.writers["alerts"].sinks[0]
        assert isinstance(alerts_sink, SparkTopicSink) == (connector == "native")
    assert samples(lake) == EXPECTED_SAMPLES
    assert anomalies(lake) == EXPECTED_ANOMALIES
    assert alerts(broker.servers) == EXPECTED_ANOMALIES
    sources = {r["source"] for r in read_table(lake, "quarantine")}
    assert sources == {"sensor-readings:0:6", "sensor-readings:0:14"}
    sent = consume(broker.servers, "sensor-anomalies", expect=len(EXPECTED_ANOMALIES))
    assert {dict(m.headers())["query"] for m in sent} == {b"alerts"}


def test_a_batch_cap_over_uneven_partitions_loses_no_reading_as_late(spark, broker, tmp_path):
    from confluent_kafka import Producer

    from devtools.broker import create_topics

    # 100 readings 5 s apart, every fifth on partition 0: an equal share of the cap let
    # partition 0 run 150 s ahead, and its watermark made partition 1's readings late.
    create_topics(broker.servers, ["uneven"], partitions=2)
    producer = Producer({"bootstrap.servers": broker.servers})
    for i in range(100):
        at = f"2023-04-12 10:{i * 5 // 60:02d}:{i * 5 % 60:02d}"
        reading = {"device_id": 377412, "sensor_freq": 10.0, "event_time": at}
        producer.produce("uneven", value=json.dumps(reading), partition=0 if i % 5 == 0 else 1)
    assert producer.flush(30) == 0
    settings = {
        "kafka.bootstrap.servers": broker.servers,
        "source.topic": "uneven",
        "source.connector": "python",
        "source.maxRecordsPerBatch": "20",
    }
    totals = run(spark, tmp_path / "lake", settings, input_path=None).listener.totals["main"]
    assert (totals.source_rows, totals.accepted, totals.late) == (100, 100, 0)
    assert totals.batches >= 5  # the cap held


def test_native_connector_where_spark_has_no_kafka_jar_is_one_line(spark, monkeypatch):
    from engine.sources import streams as sources

    monkeypatch.setattr(sources, "has_kafka", lambda _spark: False)
    spec = Registry().get("sensor_cep").with_settings({"source.connector": "native"}).source
    with pytest.raises(UserError, match=r"^source\.connector: native needs Spark's Kafka"):
        sources.kafka_connector(spark, spec)
    auto = Registry().get("sensor_cep").source
    assert sources.kafka_connector(spark, auto) == "python"
    # Options only Spark's connector reads are refused where the Python source reads the topic
    # (a startingTimestamp read it from its start).
    at = Registry().get("sensor_cep").with_settings({"source.startingTimestamp": "1"}).source
    refused = r"^source\.startingTimestamp: only Spark's Kafka connector reads it.*\(no spark-sql"
    with pytest.raises(UserError, match=refused):
        sources.kafka_connector(spark, at)
    monkeypatch.undo()
    assert sources.kafka_connector(spark, auto) == "native"
    assert sources.kafka_connector(spark, at) == "native"
    with pytest.raises(UserError, match=r"^source\.startingTimestamp: .*\(source\.connector py"):
        python = {"source.startingTimestamp": "1", "source.connector": "python"}
        sources.kafka_connector(spark, Registry().get("sensor_cep").with_settings(python).source)


def test_a_missing_topic_is_one_clear_error(spark, broker, tmp_path):
    overrides = {"kafka.bootstrap.servers": broker.servers, "source.topic": "no-such-topic"}
    with pytest.raises(UserError, match=r"source\.topic: no topic no-such-topic on 127\.0\.0\.1"):
        run(spark, tmp_path / "lake", overrides, input_path=None)


def test_an_unreachable_broker_for_the_alerts_topic_stops_once_before_the_lake(spark, tmp_path):
    from devtools.broker import free_port

    lake = tmp_path / "lake"
    nobody = {"kafka.bootstrap.servers": f"127.0.0.1:{free_port()}"}
    with pytest.raises(KafkaUnavailable, match=r"^kafka broker 127\.0\.0\.1:\d+ unreachable"):
        run(spark, lake, nobody)  # files in: only the topic sink needs the broker
    assert [p.name for p in lake.glob("*") if not p.name.startswith("_")] == []


def test_a_stop_cuts_the_real_time_batch_and_the_report_says_so(spark, broker, tmp_path):
    import io
    import threading
    import time
    from dataclasses import replace

    lake = tmp_path / "lake"
    settings = {"kafka.bootstrap.servers": broker.servers, "source.startingOffsets": "latest"}
    pipeline = Registry().get("sensor_cep").with_settings(settings)
    main = replace(next(q for q in pipeline.queries if q.name == "main"), trigger="1 second")
    pipeline = replace(
        pipeline, queries=tuple(main if q.name == "main" else q for q in pipeline.queries)
    )
    stop, out, progress, done, failures = threading.Event(), io.StringIO(), io.StringIO(), {}, []

    def run() -> None:
        try:
            opts = RunOptions(lake=lake)
            plan = plan_pipeline(pipeline)
            done["result"] = run_pipeline(spark, plan, opts, stop=stop, out=progress)
        except BaseException as err:  # surfaced below
            failures.append(err)

    thread = threading.Thread(target=run)
    thread.start()
    try:
        deadline = time.monotonic() + 120
        while len(spark.streams.active) < 2 and time.monotonic() < deadline:
            time.sleep(0.5)
        time.sleep(3)  # past the queries' first offsets ("latest")
        line = '{"device_id": 424242, "sensor_freq": -9.5, "event_time": "2023-04-12 10:00:01"}'
        produce(broker.servers, "sensor-readings", [line])
        table = lake / "sensor_anomalies"
        while time.monotonic() < deadline and not (
            DeltaTable.is_deltatable(str(table))  # a log folder alone may be a table being made
            and any(r["device_id"] == "424242" for r in read_table(lake, "sensor_anomalies"))
        ):
            time.sleep(0.5)
    finally:
        stop.set()
        thread.join(120)
    assert not failures and not thread.is_alive()
    assert [r["device_id"] for r in read_table(lake, "sensor_anomalies")] == ["424242"]
    alerts = [
        m
        for m in consume(broker.servers, "sensor-anomalies", expect=10**9, timeout_s=5)
        if b"424242" in (m.value() or b"") and ("query", b"alerts") in (m.headers() or [])
    ]
    assert len(alerts) == 1
    done["result"].report(out)
    # The alert went out at once, but the one-minute batch that sent it never ended.
    assert "query alerts: 0 batches; rows written: kafka:sensor-anomalies 0" in out.getvalue()
    assert "query alerts: the stop cut its running batch short" in out.getvalue()
    # The spec's batch cap is not used in Real-Time Mode, and the run says so.
    assert "source.maxRecordsPerBatch: not used by a continuous run" in progress.getvalue()


def test_the_broker_is_checked_for_the_sink_topics(broker, tmp_path):
    from engine.sinks.kafka import check_broker

    client = {"bootstrap.servers": broker.servers}
    check_broker(client, ["sensor-anomalies"], where=tmp_path / "p.yaml")
    with pytest.raises(UserError, match=r"p\.yaml: topic no-such-topic: not on 127\.0\.0\.1:"):
        check_broker(client, ["sensor-anomalies", "no-such-topic"], where=tmp_path / "p.yaml")


def test_spark_connector_on_a_tansu_broker_is_refused_before_it_loses_records(spark, tmp_path):
    # Spark's client read 1 of 10 messages a producer sent to tansu in one batch, silently.
    from devtools.broker import Broker
    from engine.sinks.kafka import check_broker

    refused = r"^source\.connector: Spark's Kafka connector .* loses records on the tansu broker"
    lake = tmp_path / "lake"
    with Broker(kind="tansu").start(["sensor-readings", "sensor-anomalies"]) as tansu:
        overrides = {"kafka.bootstrap.servers": tansu.servers}  # connector auto: Spark's here
        with pytest.raises(UserError, match=refused + r" at 127\.0\.0\.1:\d+; set source\."):
            run(spark, lake, overrides, input_path=None)
        client = {"bootstrap.servers": tansu.servers}
        with pytest.raises(UserError, match=refused):
            check_broker(client, ["sensor-anomalies"], where=tmp_path / "p.yaml", by_spark=True)
        check_broker(client, ["sensor-anomalies"], where=tmp_path / "p.yaml")  # librdkafka's
    assert not (lake / "_checkpoints").exists()


def test_a_replayed_batch_is_not_sent_again_once_its_tables_hold_it(spark, broker, tmp_path):
    from engine.definitions.tables import load_tables
    from engine.sinks.delta import DeltaSink
    from engine.sinks.kafka import TopicSink
    from engine.sinks.writer import MultiTableWriter

    table = load_tables(PROJECT / "tables")["sensor_anomalies"]
    rows = spark.createDataFrame(
        [("7", -1.5, "2023-04-12 10:00:01"), ("8", -2.5, "2023-04-12 10:00:02")],
        "device_id STRING, sensor_freq DOUBLE, event_time STRING",
    ).selectExpr(
        "device_id",
        "sensor_freq",
        "CAST(event_time AS TIMESTAMP) AS event_time",
        "current_timestamp() AS detected_at",
        "device_id AS key",
        "to_json(named_struct('device_id', device_id, 'sensor_freq', sensor_freq)) AS value",
    )
    topic = TopicSink("sensor-anomalies", {"bootstrap.servers": broker.servers}, where=tmp_path)
    delta = DeltaSink(table, tmp_path / "lake")
    delta.open()  # as run.py does: the table exists before the first batch
    checkpoint = tmp_path / "checkpoint"
    checkpoint.mkdir()
    (checkpoint / "metadata").write_text('{"id": "test"}')
    writer = MultiTableWriter(
        pipeline="sensor_cep",
        query="anomalies",
        sinks=[delta, topic],
        checkpoint=checkpoint,
        # What BatchViews gives: each sink's rows, from the batch, and no rule counts.
        views=lambda batch, at: (
            [batch.select(*table.column_names), batch.select("key", "value")],
            {},
        ),
    )
    writer(rows, 0)
    writer(rows, 0)  # Spark replays a batch whose commit it did not record
    assert run_records(checkpoint)[1] == {"sensor_anomalies": 2, "kafka:sensor-anomalies": 2}
    sent = consume(broker.servers, "sensor-anomalies", expect=2)
    assert sorted(m.key() for m in sent) == [b"7", b"8"]
    assert dict(sent[0].headers())["batch_id"] == b"0"
    writer(rows, 1)  # the next batch is sent
    assert len(consume(broker.servers, "sensor-anomalies", expect=4)) == 4
