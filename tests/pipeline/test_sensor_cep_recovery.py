"""sensor_cep against a real broker when things go wrong: a SIGKILL mid-stream, the broker
going away and coming back, a broker that lost what was read, and one that is not there at all.

The crash and outage tests run the Python source and producer (`source.connector=python`),
the embedded path; the outage test on tansu, whose restart on the same port the Python client
takes as the same broker coming back."""

from __future__ import annotations

import io
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import pytest

from devtools.broker import Broker, free_port
from devtools.generators.sensor_cep import generate_sensor_cep
from engine.definitions.pipeline import Registry
from engine.errors import KafkaUnavailable, UserError
from engine.plan import plan_pipeline
from engine.runtime.run import RunOptions, run_pipeline
from tests.conftest import PROJECT, batches_committed, consume, produce, read_table
from tests.pipeline.spark_processes import kill_after_batches
from tests.pipeline.test_continuous import wait_until

TOPICS = ["sensor-readings", "sensor-anomalies"]
DROP = ("ingested_at", "detected_at")  # wall-clock columns, different in every run


def snapshot(lake: Path) -> dict[str, list[dict]]:
    return {
        t: read_table(lake, t, drop=DROP)
        for t in ("sensor_samples", "sensor_anomalies", "quarantine")
    }


def runner_command(lake: Path, servers: str) -> list[str]:
    return [
        sys.executable,
        str(PROJECT / "runner.py"),
        "run",
        "sensor_cep",
        "--once",
        "--lake",
        str(lake),
        "--conf",
        f"kafka.bootstrap.servers={servers}",
        "--conf",
        "source.maxRecordsPerBatch=1400",
        "--conf",
        "source.connector=python",
    ]


# Put on a run's PYTHONPATH: the first Python streaming source worker the run starts sleeps
# past the 10 s Spark waits for it to connect back, as on a machine too busy to start Python.
LATE_WORKER = """
import os, time
if b"python_streaming_source_runner" in open("/proc/self/cmdline", "rb").read():
    try:
        os.remove(os.environ["LATE_WORKER_FLAG"])
    except (KeyError, FileNotFoundError):
        pass
    else:
        time.sleep(12)
"""


def test_sigkill_mid_stream_then_restart_loses_and_duplicates_nothing(spark, broker, tmp_path):
    # The restart also meets a source worker that starts too late: the query restarts again.
    summary = generate_sensor_cep(
        f"kafka://{broker.servers}/sensor-readings", events=4000, seed=3, faults=True
    )
    assert summary.late and summary.duplicates and summary.anomalies
    reference = tmp_path / "reference"
    pipeline = (
        Registry()
        .get("sensor_cep")
        .with_settings(
            {
                "kafka.bootstrap.servers": broker.servers,
                "source.maxRecordsPerBatch": "1400",
                "source.connector": "python",
            }
        )
    )
    run_pipeline(
        spark, plan_pipeline(pipeline, once=True), RunOptions(lake=reference, once=True, quiet=True)
    )
    expected = snapshot(reference)
    assert len(expected["sensor_anomalies"]) == summary.anomalies

    # The same input on a second broker, read by a run that is killed, then restarted.
    with Broker().start(TOPICS) as other:
        generate_sensor_cep(
            f"kafka://{other.servers}/sensor-readings", events=4000, seed=3, faults=True
        )
        lake = tmp_path / "lake"
        command = runner_command(lake, other.servers)
        # Killed right after the main query commits its second batch (of four).
        checkpoint = lake / "_checkpoints" / "sensor_cep" / "main"
        kill_after_batches(command, checkpoint, 2)
        assert batches_committed(checkpoint) < 4, "the kill must land mid-stream"

        late = tmp_path / "late_worker"
        late.mkdir()
        (late / "sitecustomize.py").write_text(LATE_WORKER)
        (late / "flag").touch()
        env = {**os.environ, "PYTHONPATH": str(late), "LATE_WORKER_FLAG": str(late / "flag")}
        restart = subprocess.run(command, capture_output=True, text=True, timeout=600, env=env)
        assert restart.returncode == 0, restart.stderr
        assert not (late / "flag").exists(), "no source worker started late"
        assert re.search(
            r"^query \w+: Python worker failed to connect back; restarting it \(1 of 3\)$",
            restart.stdout,
            re.M,
        ), restart.stdout
        assert snapshot(lake) == expected
        # Every anomaly reached the topic (a batch cut short by the kill may be sent twice).
        sent = consume(other.servers, "sensor-anomalies", expect=summary.anomalies)
        readings = {
            (d["device_id"], d["sensor_freq"]) for d in (json.loads(m.value()) for m in sent)
        }
        assert readings == {
            (r["device_id"], r["sensor_freq"]) for r in expected["sensor_anomalies"]
        }


def test_once_after_a_stop_between_batches_closes_the_windows_that_came_due(
    spark, broker, tmp_path
):
    # The first batch moves the watermark to 30 s behind its newest reading; the batch that
    # closes the windows before it has no input and comes next. A stop in between (SIGTERM
    # during the first batch) left them open, and a --once run that found no new input
    # ended with 0 batches: sensor_samples stayed empty.
    generate_sensor_cep(f"kafka://{broker.servers}/sensor-readings", events=2000, seed=5)
    settings = {"kafka.bootstrap.servers": broker.servers, "source.connector": "python"}
    reference = tmp_path / "reference"
    pipeline = Registry().get("sensor_cep").with_settings(settings)
    run_pipeline(
        spark, plan_pipeline(pipeline, once=True), RunOptions(lake=reference, once=True, quiet=True)
    )
    expected = snapshot(reference)
    assert expected["sensor_samples"], "no window closed in the reference run"

    lake = tmp_path / "lake"
    # A continuous run, all input in one batch as in the reference, with this session's
    # shuffle partitions: the restarts below run in it.
    command = [sys.executable, str(PROJECT / "runner.py"), "run", "sensor_cep", "--lake", str(lake)]
    for key, value in {**settings, "spark.sql.shuffle.partitions": "2"}.items():
        command += ["--conf", f"{key}={value}"]
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    planned = lake / "_checkpoints" / "sensor_cep" / "main" / "offsets" / "0"
    deadline = time.monotonic() + 300
    while not planned.exists():
        assert proc.poll() is None and time.monotonic() < deadline, "no first batch"
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)  # the batch under way ends, then the run stops
    assert proc.wait(300) == 0

    def once() -> str:
        opts = RunOptions(lake=lake, once=True, quiet=True)
        out = io.StringIO()
        run_pipeline(spark, plan_pipeline(pipeline, once=True), opts, out=out).report(out)
        return out.getvalue()

    once()
    assert snapshot(lake) == expected
    # Once done, that batch is not logged again: another --once has nothing to do.
    again = once()
    assert "query main: 0 batches" in again, again


ANOMALY = '{{"device_id": {d}, "sensor_freq": -{d}.5, "event_time": "2023-04-12 10:00:{s:02d}"}}'


@contextmanager
def continuous_run(spark, lake: Path, settings: dict[str, str]) -> Iterator[io.StringIO]:
    """sensor_cep running on 1-second triggers in a thread while the block runs; its output.
    The run is stopped at the end of the block, and must not have failed."""
    pipeline = Registry().get("sensor_cep").with_settings(settings)
    pipeline = replace(
        pipeline, queries=tuple(replace(q, trigger="1 second") for q in pipeline.queries)
    )
    out, stop, failures = io.StringIO(), threading.Event(), []

    def run() -> None:
        try:
            opts = RunOptions(lake=lake, quiet=True)
            run_pipeline(spark, plan_pipeline(pipeline), opts, stop=stop, out=out)
        except BaseException as err:  # surfaced below
            failures.append(err)

    thread = threading.Thread(target=run)
    thread.start()
    try:
        yield out
    finally:
        stop.set()
        thread.join(180)
    assert not failures, failures


def anomalies(lake: Path) -> set[str]:
    """Devices in sensor_anomalies; none before its first commit (Spark creates the folder
    before it commits)."""
    if not (lake / "sensor_anomalies" / "_delta_log" / f"{0:020d}.json").exists():
        return set()
    return {r["device_id"] for r in read_table(lake, "sensor_anomalies")}


def unreachable(out: io.StringIO) -> dict[str, str]:
    """The last line each query said about an unreachable broker, by query name."""
    lines = [ln for ln in out.getvalue().splitlines() if "unreachable" in ln]
    return {ln.split(":")[0].removeprefix("query "): ln for ln in lines}


def test_broker_outage_is_reported_and_the_run_resumes_when_it_is_back(spark, tmp_path):
    broker = Broker(kind="tansu").start(TOPICS)
    lake = tmp_path / "lake"
    settings = {
        "kafka.bootstrap.servers": broker.servers,
        "kafka.message.timeout.ms": "3000",
        "source.timeout": "2",
        "source.connector": "python",
        # The in-memory broker comes back empty: its offsets start again at 0.
        "source.failOnDataLoss": "false",
    }
    try:
        with continuous_run(spark, lake, settings) as out:
            produce(broker.servers, "sensor-readings", [ANOMALY.format(d=d, s=d) for d in (1, 2)])
            wait_until(lambda: anomalies(lake) == {"1", "2"})
            sent = consume(broker.servers, "sensor-anomalies", expect=2)
            assert sorted(json.loads(m.value())["device_id"] for m in sent) == ["1", "2"]

            broker.stop()
            # Both queries must have seen the outage: a query that did not (its next look at
            # the topic fell after the restart) keeps a producer the new broker does not know.
            wait_until(lambda: set(unreachable(out)) >= {"alerts", "main"}, timeout_s=60)
            for query, line in unreachable(out).items():
                assert query in {"alerts", "main"}
                assert f"kafka broker {broker.servers} unreachable" in line
                assert "retrying every" in line
            assert "Traceback" not in out.getvalue()

            broker.start(TOPICS)  # same port, empty topics
            produce(broker.servers, "sensor-readings", [ANOMALY.format(d=3, s=3)])
            wait_until(lambda: anomalies(lake) == {"1", "2", "3"}, timeout_s=120)
            # The new broker got the alert that came after the outage, at the first attempt:
            # the restarted query has a new producer (the broker does not know the old one).
            sent = consume(broker.servers, "sensor-anomalies", expect=1)
            assert [json.loads(m.value())["device_id"] for m in sent] == ["3"]
            assert "not delivered" not in out.getvalue()
    finally:
        broker.stop()


def broker_news(out: io.StringIO, servers: str) -> dict[str, list[str]]:
    """What the run said about Spark's client waiting on `servers`, per query, in order:
    `waiting` or `resumed`; a line of that kind in another form fails the test."""
    said = re.compile(
        rf"query (\w+): kafka broker {re.escape(servers)} (?:"
        r"(?P<waiting>unreachable \(kafka.bootstrap.servers\): no offsets for \d+ s "
        r"\(source.timeout\); Spark's client keeps asking)"
        r"|(?P<resumed>answered again after \d+ s))"
    )
    news: dict[str, list[str]] = {}
    for ln in out.getvalue().splitlines():
        if f"kafka broker {servers}" in ln:
            m = said.fullmatch(ln)
            assert m, ln
            news.setdefault(m[1], []).append("waiting" if m["waiting"] else "resumed")
    return news


def test_spark_connector_waiting_on_a_broker_that_went_away_is_said_and_the_run_goes_on(
    spark, tmp_path
):
    """Spark's Kafka client waits for a broker for minutes, without a word of its own; the run
    says so after `source.timeout`, and again when the broker (its log kept) is back."""
    broker = Broker().start(TOPICS)  # Apache Kafka: it keeps its log across a restart
    lake = tmp_path / "lake"
    settings = {
        "kafka.bootstrap.servers": broker.servers,
        "source.connector": "native",
        "source.timeout": "2",
    }

    def last_news() -> dict[str, str]:
        return {query: said[-1] for query, said in broker_news(out, broker.servers).items()}

    try:
        with continuous_run(spark, lake, settings) as out:
            produce(broker.servers, "sensor-readings", [ANOMALY.format(d=1, s=1)])
            wait_until(lambda: anomalies(lake) == {"1"})

            # A broker in its controlled shutdown may still answer a query that has waited
            # past the patience: that query says so, then waits again once the broker is gone.
            broker.stop(keep_log=True)
            waiting = {"alerts": "waiting", "main": "waiting"}
            wait_until(lambda: last_news() == waiting, timeout_s=60)

            broker.start()
            produce(broker.servers, "sensor-readings", [ANOMALY.format(d=2, s=2)])
            wait_until(lambda: anomalies(lake) == {"1", "2"}, timeout_s=120)
            wait_until(lambda: last_news() == {"alerts": "resumed", "main": "resumed"})
            # Nothing lost or sent twice through the outage.
            sent = consume(broker.servers, "sensor-anomalies", expect=2)
            assert sorted(json.loads(m.value())["device_id"] for m in sent) == ["1", "2"]
    finally:
        broker.stop()
    news = broker_news(out, broker.servers)
    for said in news.values():  # each wait said once, and its end once
        assert said == ["waiting", "resumed"] * (len(said) // 2), said
    events = read_table(lake, "_event_log")
    waits = [(e["query"], e["status"]) for e in events if e["kind"] == "error"]
    assert sorted(waits) == sorted((q, s) for q, said in news.items() for s in said)


def test_once_on_spark_connector_when_the_broker_goes_away_mid_run_then_a_rerun_finishes(
    spark, tmp_path
):
    """Spark's Kafka client gives up on a broker gone mid-batch with a Java timeout, after
    Kafka's `default.api.timeout.ms` or Spark's `kafkaConsumer.pollTimeoutMs` (both set short
    here): one line naming the broker, exit 2, and the next run, with the broker back, writes
    each anomaly once."""
    broker = Broker().start(TOPICS)  # Apache Kafka: it keeps its log across a restart
    lake = tmp_path / "lake"
    settings = {
        "kafka.bootstrap.servers": broker.servers,
        "source.connector": "native",
        "source.maxRecordsPerBatch": "250",
        "kafka.default.api.timeout.ms": "3000",
        "kafka.request.timeout.ms": "2000",
        "source.kafkaConsumer.pollTimeoutMs": "3000",
    }
    plan = plan_pipeline(Registry().get("sensor_cep").with_settings(settings), once=True)
    opts = RunOptions(lake=lake, once=True, quiet=True)
    failures: list[BaseException] = []

    def once() -> None:
        try:
            run_pipeline(spark, plan, opts, out=io.StringIO())
        except BaseException as err:
            failures.append(err)

    try:
        summary = generate_sensor_cep(
            f"kafka://{broker.servers}/sensor-readings", events=2000, seed=5
        )
        thread = threading.Thread(target=once)
        thread.start()
        checkpoint = lake / "_checkpoints" / "sensor_cep" / "main"
        wait_until(lambda: batches_committed(checkpoint) >= 2 or not thread.is_alive())
        broker.stop(keep_log=True)
        thread.join(120)
        assert not thread.is_alive(), "the run did not stop within 120 s of the outage"
        assert batches_committed(checkpoint) < 8, "the outage must land mid-run"
        [failed] = failures
        assert isinstance(failed, KafkaUnavailable), failed  # a continuous run retries it
        assert re.fullmatch(
            rf"query (main|alerts): kafka broker {re.escape(broker.servers)} unreachable "
            r"\(kafka.bootstrap.servers\): .+",
            str(failed),
        ), failed

        broker.start()
        failures.clear()
        once()
        assert not failures, failures
        found = [(r["device_id"], r["event_time"]) for r in read_table(lake, "sensor_anomalies")]
        assert len(found) == len(set(found)) == summary.anomalies
    finally:
        broker.stop()


def test_a_setting_librdkafka_lacks_on_the_python_connector_is_one_line(spark, tmp_path):
    """librdkafka refuses a client with a setting it does not know: said as that, not as an
    unreachable broker, before the lake is made."""
    settings = {"source.connector": "python", "kafka.default.api.timeout.ms": "3000"}
    pipeline = Registry().get("sensor_cep").with_settings(settings)
    with pytest.raises(UserError) as refused:
        run_pipeline(
            spark, plan_pipeline(pipeline, once=True), RunOptions(lake=tmp_path / "lake", once=True)
        )
    assert str(refused.value) == (
        "kafka.default.api.timeout.ms: no such setting in librdkafka, the Kafka client of the "
        "Python connector (source.connector)"
    )
    assert not (tmp_path / "lake").exists()


# Spark's connector on Apache Kafka: tansu answers ListOffsets short of the end, and Spark's
# connector asks it (docs/decisions.md).
@pytest.mark.parametrize(("connector", "kind"), [("native", None), ("python", "tansu")])
def test_a_broker_that_lost_what_the_checkpoint_read_stops_the_run_until_the_user_goes_on(
    spark, tmp_path, connector, kind
):
    broker = Broker(kind=kind).start(TOPICS)
    lake = tmp_path / "lake"
    settings = {"kafka.bootstrap.servers": broker.servers, "source.connector": connector}

    def once(extra: dict[str, str]) -> None:
        pipeline = Registry().get("sensor_cep").with_settings({**settings, **extra})
        opts = RunOptions(lake=lake, once=True, quiet=True)
        run_pipeline(spark, plan_pipeline(pipeline, once=True), opts, out=io.StringIO())

    try:
        produce(broker.servers, "sensor-readings", [ANOMALY.format(d=d, s=d) for d in (1, 2, 3)])
        once({})
        broker.stop()
        broker.start(TOPICS)  # same port, empty topics: offsets start again at 0
        produce(broker.servers, "sensor-readings", [ANOMALY.format(d=4, s=4)])
        with pytest.raises(UserError) as lost:
            once({})
        # The same line on both connectors, naming the pipeline's option, not Spark's.
        assert str(lost.value).startswith("query ")
        assert "the broker lost data" in str(lost.value)
        assert str(lost.value).endswith("; set source.failOnDataLoss=false to go on")
        if connector == "native":  # the Python source going on: the outage test
            once({"source.failOnDataLoss": "false"})
            produce(broker.servers, "sensor-readings", [ANOMALY.format(d=5, s=5)])
            once({"source.failOnDataLoss": "false"})
            # Spark's connector goes on after what the broker held when it saw the loss.
            found = {r["device_id"] for r in read_table(lake, "sensor_anomalies")}
            assert found == {"1", "2", "3", "5"}
    finally:
        broker.stop()


def test_once_with_no_broker_is_one_line_and_exit_2(tmp_path):
    from tests.pipeline.test_cli import one_error_line, runner

    servers = f"127.0.0.1:{free_port()}"
    result = runner(
        "run", "sensor_cep", "--once", "--conf", f"kafka.bootstrap.servers={servers}",
        "--conf", "source.timeout=2", "--lake", str(tmp_path / "lake"),
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert one_error_line(result) == (
        f"error: kafka broker {servers} unreachable (kafka.bootstrap.servers): {servers} "
        "Connection refused"
    )
    # Said before Spark started (librdkafka asked for 15 s after it) and before the run lock:
    # the new lake is not made at all.
    assert not (tmp_path / "lake").exists()


def broker_command(port: int) -> tuple[subprocess.Popen, str]:
    """`runner.py broker --port PORT` running, and the first line it printed ("" if it exited)."""
    proc = subprocess.Popen(
        [sys.executable, str(PROJECT / "runner.py"), "broker", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    return proc, proc.stdout.readline()


def test_broker_command_serves_topics_until_ctrl_c():
    # The port is free when drawn, but another process may take it before the broker binds
    # it: then the broker says so and the test draws another.
    for _ in range(3):
        port = free_port()
        proc, first = broker_command(port)
        errors = "" if first else proc.stderr.read()
        if not (f"127.0.0.1:{port}" in errors and "in use" in errors):
            break
    try:
        assert f"on 127.0.0.1:{port}; topics: sensor-anomalies, sensor-readings" in first, errors
        produce(f"127.0.0.1:{port}", "sensor-readings", ["hello"])
        assert [m.value() for m in consume(f"127.0.0.1:{port}", "sensor-readings", expect=1)] == [
            b"hello"
        ]
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 0, errors + proc.stderr.read()


@pytest.mark.parametrize("kind", ["kafka", "tansu"])
def test_broker_command_on_a_port_in_use_says_so_in_one_line(kind):
    # tansu used to take the other process for itself (its readiness check is a connect), then
    # failed on creating the topics with a transport error and exit 1.
    from tests.pipeline.test_cli import one_error_line, runner

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = runner("broker", "--port", str(port), "--kind", kind)
    assert result.returncode == 2, result.stderr
    assert one_error_line(result) == (
        f"error: broker: 127.0.0.1:{port} is in use by another process"
    )


def test_broker_command_with_a_topic_kafka_refuses_leaves_no_broker_behind():
    from tests.pipeline.test_cli import one_error_line, runner

    port = free_port()
    result = runner("broker", "--port", str(port), "--topics", "bad/name")
    assert result.returncode == 2, result.stderr
    assert one_error_line(result).startswith("error: broker: cannot create topic bad/name: ")
    # The broker it had started is stopped: nothing listens on the port any more.
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", port)) != 0
