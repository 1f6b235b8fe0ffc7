"""Benchmark: the sensor_cep pipeline (Kafka in, Delta and Kafka out) with Spark's Kafka
connector and with the Python source on the same topic, and the end-to-end latency of its
anomaly alerts.

Prints figures; it asserts nothing about timings. One run starts its own Kafka-protocol broker
(devtools/broker.py), generates N readings into topic ``sensor-readings`` (timed), then runs
subprocesses one after another, each timed from start to exit with the peak RSS of its
whole process tree (Python driver + JVM + Python workers):

* pipeline: ``python runner.py run sensor_cep --once --conf source.connector=native`` into a
  fresh lake (all queries; Spark's Kafka source and sink);
* python: the same with ``--conf source.connector=python`` (engine/sources/kafka.py in,
  confluent-kafka out);
* with ``--baselines``, parse only (the source and ``sql/sensor_cep/sensor_readings.sql`` into
  Spark's ``noop`` sink with ``Trigger.AvailableNow``) and source only (the source into ``noop``).

Then, unless ``--skip-latency``, a continuous run of the pipeline on a second, fresh broker
(Spark's connector; the alerts query in Real-Time Mode) while this process sends ~200
readings/s plus one uniquely numbered anomaly every 0.25 s, and times each anomaly from just
before ``produce()`` to its arrival on topic ``sensor-anomalies``.

Usage: ``.venv/bin/python bench/bench_sensor_cep.py [--events N] [--seed S] [--workdir DIR]
[--latency-seconds T] [--skip-latency] [--baselines] [--wait-idle SECONDS]``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from common import (
    GIB,
    PROJECT_DIR,
    Measurement,
    QueryTimes,
    TreeSampler,
    checkpoint_timings,
    measure,
    print_runs,
    rate,
    run_figures,
    secs,
)

PIPELINE = "sensor_cep"
INPUT_TOPIC = "sensor-readings"
ALERT_TOPIC = "sensor-anomalies"
TABLES = ("sensor_samples", "sensor_anomalies", "quarantine")
# The query writing the tables. The latency load starts after its first batch: `alerts`, started
# right after it, is reading by then, and in Real-Time Mode it reports its first batch only when
# that minute-long batch ends.
TABLES_QUERY = "main"
PARSE_SQL = PROJECT_DIR / "sql" / "sensor_cep" / "sensor_readings.sql"
BASELINES = ("parse", "source")
LABELS = {
    "pipeline": "pipeline (native)",
    "python": "pipeline (python)",
    "parse": "parse only",
    "source": "source only",
}
CONNECTORS = {"pipeline": "native", "python": "python"}
# Latency run: the load and the probes.
NORMAL_PER_S = 200.0
ANOMALY_EVERY_S = 0.25  # 240 alerts a minute: p95 over at least 200
ANOMALY_BASE = 1000  # anomaly i has sensor_freq -(ANOMALY_BASE + i)
STRAGGLER_WAIT_S = 30.0
FIRST_BATCH_WAIT_S = 300.0


# --- Kafka helpers ----------------------------------------------------------------------------


def count_messages(servers: str, topic: str, quiet_s: float = 2.0) -> int:
    """Messages in partition 0 of `topic`: read from offset 0 until none arrive for `quiet_s`.

    Not ListOffsets / get_watermark_offsets(cached=False): tansu answers them with the base
    offset of the last record batch, short of the end (docs/decisions.md).
    """
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": servers,
            "group.id": "bench-count",
            "enable.auto.commit": False,
            "log_level": 0,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        count = 0
        last = time.monotonic()
        while time.monotonic() - last < quiet_s:
            msgs = consumer.consume(num_messages=1000, timeout=0.2)
            good = sum(1 for m in msgs if m.error() is None)
            if good:
                count += good
                last = time.monotonic()
        return count
    finally:
        consumer.close()


def table_rows(lake: Path) -> dict[str, int | None]:
    """Rows of each Delta table the pipeline writes (None: the table is not there)."""
    from deltalake import DeltaTable

    from engine.lake import read_arrow

    rows: dict[str, int | None] = {}
    for table in TABLES:
        path = lake / table
        is_table = DeltaTable.is_deltatable(str(path))
        rows[table] = read_arrow(DeltaTable(str(path))).num_rows if is_table else None
    return rows


def max_records() -> str:
    """maxRecordsPerBatch as written in the pipeline's YAML."""
    from engine.definitions.pipeline import Registry

    return str(Registry().get(PIPELINE).source.options.get("maxRecordsPerBatch", "none"))


# --- throughput: the pipeline and the baselines -----------------------------------------------


def pipeline_command(
    lake: Path, servers: str, *, once: bool, connector: str = "native"
) -> list[str]:
    """The runner's own command, as a user would type it."""
    args = ["run", PIPELINE, *(["--once"] if once else []), "--lake", str(lake)]
    conf = ["--conf", f"kafka.bootstrap.servers={servers}"]
    return [sys.executable, "runner.py", *args, *conf, "--conf", f"source.connector={connector}"]


def baseline_command(kind: str, servers: str, checkpoint: Path) -> list[str]:
    """This file run as a baseline subprocess."""
    command = [sys.executable, str(Path(__file__).resolve()), "--baseline", kind]
    return [*command, "--servers", servers, "--checkpoint", str(checkpoint)]


def _run_baseline(kind: str, servers: str, checkpoint: Path) -> int:
    """Subprocess body: the pipeline's Kafka source (and, for `parse`, its parsing SQL) into
    Spark's noop sink, reading what the topic holds now."""
    from engine.definitions.pipeline import Registry
    from engine.runtime.session import get_spark
    from engine.sources.streams import open_source

    spark = get_spark()
    print(f"baseline {kind}: Spark session ready", flush=True)
    pipeline = Registry().get(PIPELINE).with_settings({"kafka.bootstrap.servers": servers})
    # open_source registers engine.sources.kafka.KafkaSource and reads format streamlake_kafka
    # with the YAML's options (topic, startingOffsets, maxRecordsPerBatch) plus the broker,
    # adding origin = concat_ws(':', topic, partition, offset): what the pipeline reads.
    df = open_source(spark, pipeline)
    if kind == "parse":
        df.createOrReplaceTempView(pipeline.source.view)  # raw_readings
        spark.sql(PARSE_SQL.read_text())  # creates the view sensor_readings
        df = spark.table("sensor_readings")
    query = (
        df.writeStream.queryName(kind)
        .format("noop")
        .outputMode("append")
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    print(f"baseline {kind}: query started", flush=True)
    query.awaitTermination()
    progress = query.recentProgress  # complete here: a few batches, filled before each event
    rows = sum(p["numInputRows"] for p in progress)
    print(f"baseline {kind}: {len(progress)} batches, {rows:,} rows in", flush=True)
    spark.stop()
    return 0


# --- latency ----------------------------------------------------------------------------------


def _percentile(ordered: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of sorted values (q in 0..100)."""
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


class _AlertConsumer(threading.Thread):
    """Reads the alert topic from its start; records when each numbered anomaly arrives."""

    def __init__(self, servers: str) -> None:
        super().__init__(daemon=True)
        self.servers = servers
        self.received: dict[int, float] = {}  # anomaly number -> time.monotonic() of arrival
        self.duplicates = 0
        self.other = 0  # alerts that are not ours (none expected: normal readings are > 0)
        self.ready = threading.Event()
        self._done = threading.Event()

    def run(self) -> None:
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        consumer = Consumer(
            {
                "bootstrap.servers": self.servers,
                "group.id": "bench-latency",
                "enable.auto.commit": False,
                # A fetch that finds nothing returns after 50 ms, not librdkafka's 500 ms.
                "fetch.wait.max.ms": 50,
                "log_level": 0,
            }
        )
        try:
            consumer.assign([TopicPartition(ALERT_TOPIC, 0, OFFSET_BEGINNING)])
            self.ready.set()
            while not self._done.is_set():
                for msg in consumer.consume(num_messages=500, timeout=0.1):
                    arrived = time.monotonic()
                    if msg.error() is not None:
                        continue
                    try:
                        freq = float(json.loads(msg.value())["sensor_freq"])
                    except (ValueError, KeyError, TypeError):
                        self.other += 1
                        continue
                    number = round(-freq) - ANOMALY_BASE
                    if number < 0:
                        self.other += 1
                    elif number in self.received:
                        self.duplicates += 1
                    else:
                        self.received[number] = arrived
        finally:
            consumer.close()

    def stop(self) -> None:
        self._done.set()
        self.join()


class _OutputWatcher(threading.Thread):
    """Copies the continuous run's output to its log; notes each query's first batch line."""

    def __init__(self, stream: Any, log: Path, t0: float, queries: Sequence[str]) -> None:
        super().__init__(daemon=True)
        self.stream, self.log, self.t0 = stream, log, t0
        self.first_batch = {q: threading.Event() for q in queries}

    def run(self) -> None:
        with self.log.open("w") as out:
            for line in self.stream:
                out.write(line)
                out.flush()
                echo = line.startswith(("query ", "error", "Traceback", "kafka "))
                for query, seen in self.first_batch.items():
                    if line.startswith(f"[{query}] batch ") and not seen.is_set():
                        seen.set()
                        echo = True
                if echo:
                    print(f"  {time.monotonic() - self.t0:7.1f}s | {line.rstrip()}", flush=True)

    def all_started(self) -> bool:
        return all(e.is_set() for e in self.first_batch.values())


def _send_load(servers: str, seconds: float, seed: int) -> tuple[dict[int, float], int]:
    """Readings at NORMAL_PER_S plus anomaly i every ANOMALY_EVERY_S for `seconds`; event time
    is now. Returns each anomaly's send time (time.monotonic() just before produce()) and the
    number of normal readings sent."""
    from engine.sinks.kafka_producer import KafkaDeliveryError, KafkaProducer

    rng = random.Random(seed)
    devices = [str(n) for n in rng.sample(range(100_000, 1_000_000), 40)]
    producer = KafkaProducer(
        {
            "bootstrap.servers": servers,
            "enable.idempotence": True,
            "linger.ms": 5,
            "log_level": 0,
        }
    )
    sent: dict[int, float] = {}
    normals = 0

    def produce(device: str, freq: float) -> None:
        stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
        value = json.dumps({"device_id": int(device), "sensor_freq": freq, "event_time": stamp})
        producer.send(INPUT_TOPIC, value.encode(), device.encode())

    start = time.monotonic()
    end = start + seconds
    next_normal, next_anomaly = start, start + ANOMALY_EVERY_S / 2
    try:
        while (now := time.monotonic()) < end:
            while next_normal <= now:
                produce(rng.choice(devices), round(rng.uniform(20.0, 80.0), 2))
                normals += 1
                next_normal += 1 / NORMAL_PER_S
            if next_anomaly <= now:
                number = len(sent)
                sent[number] = time.monotonic()
                produce(rng.choice(devices), -float(ANOMALY_BASE + number))
                next_anomaly += ANOMALY_EVERY_S
            producer.poll(0)
            time.sleep(max(0.0, min(next_normal, next_anomaly, end) - time.monotonic()))
        producer.flush(30)
    except KafkaDeliveryError as err:
        # The figures still cover the alerts of what was sent; the broker's log says more.
        print(f"!! latency: {err}", flush=True)
    return sent, normals


def measure_latency(workdir: Path, seconds: float, seed: int) -> dict[str, Any]:
    """A continuous pipeline run on a fresh broker and lake, under a steady load; the time from
    sending each anomaly to receiving its alert."""
    from devtools.broker import Broker

    runs_dir = workdir / "runs"
    lake = runs_dir / "latency-lake"
    shutil.rmtree(lake, ignore_errors=True)
    log = runs_dir / "latency.log"
    result: dict[str, Any] = {
        "normal_per_s": NORMAL_PER_S,
        "anomaly_every_s": ANOMALY_EVERY_S,
        "seconds": seconds,
        "send_time": "time.monotonic() just before Producer.produce()",
        "receive_time": "time.monotonic() when the consumer returns the alert",
        "log": str(log),
    }
    broker = Broker(log=runs_dir / "latency-broker.log").start([INPUT_TOPIC, ALERT_TOPIC])
    command = pipeline_command(lake, broker.servers, once=False)
    result["command"] = command
    print(f"\n== latency: {' '.join(command)}", flush=True)
    consumer = _AlertConsumer(broker.servers)
    proc: subprocess.Popen[str] | None = None
    sampler: TreeSampler | None = None
    try:
        t0 = time.monotonic()
        proc = subprocess.Popen(
            command,
            cwd=PROJECT_DIR,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
            start_new_session=True,  # its own group, so a hung run can be killed whole
        )
        sampler = TreeSampler(proc.pid)
        sampler.start()
        watcher = _OutputWatcher(proc.stdout, log, t0, (TABLES_QUERY,))
        watcher.start()
        # Batch 0 runs on the empty topic; the load starts once it has.
        deadline = time.monotonic() + FIRST_BATCH_WAIT_S
        while not watcher.all_started() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        if not watcher.all_started():
            result["error"] = "the pipeline did not start its queries"
            print(f"!! latency: {result['error']}; see {log}", flush=True)
            return result
        result["startup_s"] = round(time.monotonic() - t0, 1)
        consumer.start()
        consumer.ready.wait(10)
        print(
            f"  sending {NORMAL_PER_S:.0f} readings/s + 1 anomaly every {ANOMALY_EVERY_S} s "
            f"for {seconds:g} s",
            flush=True,
        )
        sent, normals = _send_load(broker.servers, seconds, seed)
        deadline = time.monotonic() + STRAGGLER_WAIT_S
        while len(consumer.received) < len(sent) and time.monotonic() < deadline:
            time.sleep(0.2)
        latencies = sorted(consumer.received[i] - sent[i] for i in consumer.received if i in sent)
        result.update(
            sent=len(sent),
            normal_sent=normals,
            received=len(latencies),
            duplicates=consumer.duplicates,
            other_alerts=consumer.other,
        )
        if latencies:
            result.update(
                p50_s=_percentile(latencies, 50),
                p95_s=_percentile(latencies, 95),
                max_s=latencies[-1],
                min_s=latencies[0],
                mean_s=statistics.fmean(latencies),
            )
    finally:
        if consumer.is_alive():
            consumer.stop()
        if proc is not None:
            result["exit_code"] = _stop_run(proc)
        if sampler is not None:
            sampler.stop()
            result["peak_rss_bytes"] = sampler.peak
            result["tree_cpu_s"] = round(sampler.tree_cpu, 1)
            result["other_cpu_s"] = round(max(0.0, sampler.machine_busy - sampler.tree_cpu), 1)
        broker.stop()
    queries = checkpoint_timings(lake / "_checkpoints" / PIPELINE)
    result["queries"] = {q: _batch_summary(t) for q, t in queries.items()}
    return result


def _stop_run(proc: subprocess.Popen[str], timeout_s: float = 120.0) -> int:
    """SIGTERM (the runner stops its queries between batches and exits); kill if it hangs."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        print(f"!! latency: pipeline did not stop within {timeout_s:g} s; killing it", flush=True)
        os.killpg(proc.pid, signal.SIGKILL)
        return proc.wait()


def _batch_summary(t: QueryTimes) -> dict[str, Any]:
    """Batch count and durations (planned to committed) of one query. Median and max leave out
    batch 0, which ran on the empty topic before the load started (it includes warm-up)."""
    loaded = sorted(t.batch_s[1:])
    return {
        "batches": len(t.batch_s),
        "batch_median_s": statistics.median(loaded) if loaded else None,
        "batch_max_s": loaded[-1] if loaded else None,
        "batch_s": t.batch_s,
    }


# --- figures ----------------------------------------------------------------------------------


def print_figures(data: dict[str, Any]) -> None:
    """The compact figures table."""
    gen = data["generation"]
    print(f"\n{'events':<24}{data['events']:>9,}   ({data['settings']})")
    print(
        f"{'generate (produce)':<24}{secs(gen['seconds'])} {rate(gen['events_per_s'])}"
        f"   {gen['summary']['anomalies']:,} anomalies, {gen['summary']['devices']:,} devices"
    )
    print_runs(data["runs"], LABELS)
    rows = data.get("rows")
    if rows:
        tables = ", ".join(
            f"{t} {'-' if n is None else f'{n:,}'}" for t, n in rows["tables"].items()
        )
        print(f"{'rows':<24}{tables}; topic {ALERT_TOPIC} {rows['topic_messages']:,} messages")
        print(f"{'':<24}(generated: {gen['summary']['anomalies']:,} anomalies)")
    lat = data.get("latency")
    if lat:
        if "p50_s" in lat:
            print(
                f"{'latency (anomaly alert)':<24}sent {lat['sent']}, received {lat['received']}"
                f" ({lat['duplicates']} duplicates)   p50 {lat['p50_s']:.2f} s"
                f"   p95 {lat['p95_s']:.2f} s   max {lat['max_s']:.2f} s"
            )
        else:
            print(f"{'latency (anomaly alert)':<24}no figures: {lat.get('error', 'no alerts')}")
        if "peak_rss_bytes" in lat:
            print(
                f"{'  continuous run':<24}start-up {secs(lat.get('startup_s')).strip()}"
                f"   peak RSS {lat['peak_rss_bytes'] / GIB:.1f} GiB"
                f"   CPU {lat['tree_cpu_s']:5.0f} s (other {lat['other_cpu_s']:3.0f} s)"
                f"   exit {lat.get('exit_code')}"
            )
        for query, v in lat.get("queries", {}).items():
            if v["batch_median_s"] is None:
                continue
            print(
                f"{'  query ' + query:<24}{v['batches']} batches; after batch 0: median "
                f"{v['batch_median_s']:.2f} s, max {v['batch_max_s']:.2f} s"
            )


# --- command line -----------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=200_000, help="readings to generate")
    parser.add_argument("--seed", type=int, default=0, help="generator seed (default 0)")
    parser.add_argument(
        "--workdir",
        type=Path,
        help="lakes, logs and sensor_cep_figures.json (default: a new temporary folder)",
    )
    parser.add_argument(
        "--latency-seconds",
        type=float,
        default=60.0,
        metavar="T",
        help="how long to send load in the latency run (default 60)",
    )
    parser.add_argument("--skip-latency", action="store_true", help="no latency run")
    parser.add_argument(
        "--baselines", action="store_true", help="also time the parse-only and source-only runs"
    )
    parser.add_argument(
        "--wait-idle",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="before each throughput run, wait up to this long for other work on the machine "
        "to end (default 30; 0 to not wait)",
    )
    # Internal: the baseline subprocess mode.
    parser.add_argument("--baseline", choices=BASELINES, help=argparse.SUPPRESS)
    parser.add_argument("--servers", help=argparse.SUPPRESS)
    parser.add_argument("--checkpoint", type=Path, help=argparse.SUPPRESS)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Generate, measure, print and save the figures; 1 if a run failed."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parser().parse_args(argv)
    if args.baseline:
        return _run_baseline(args.baseline, args.servers, args.checkpoint)
    if args.events < 1:
        raise SystemExit("--events must be at least 1")

    from devtools.broker import Broker
    from devtools.generators.sensor_cep import generate_sensor_cep

    workdir = (args.workdir or Path(tempfile.mkdtemp(prefix="bench_sensor_cep-"))).resolve()
    runs_dir = workdir / "runs"
    runs_dir.mkdir(parents=True, exist_ok=True)
    print(f"workdir {workdir}", flush=True)
    settings = (
        f"seed {args.seed}, maxRecordsPerBatch {max_records()}, 1 partition, {os.cpu_count()} cores"
    )
    result: dict[str, Any] = {"events": args.events, "seed": args.seed, "settings": settings}

    runs: dict[str, Measurement] = {}
    broker = Broker(log=runs_dir / "broker.log").start([INPUT_TOPIC, ALERT_TOPIC])
    try:
        print(f"broker at {broker.servers}; generating {args.events:,} readings", flush=True)
        t0 = time.monotonic()
        url = f"kafka://{broker.servers}/{INPUT_TOPIC}"
        summary = generate_sensor_cep(url, events=args.events, seed=args.seed)
        gen_s = time.monotonic() - t0
        result["generation"] = {
            "seconds": round(gen_s, 3),
            "events_per_s": args.events / gen_s,
            "summary": summary.as_dict(),
        }
        print(f"generated {summary.lines:,} lines in {gen_s:.1f} s", flush=True)

        for run, connector in CONNECTORS.items():
            lake = runs_dir / f"{run}-lake"
            shutil.rmtree(lake, ignore_errors=True)
            runs[run] = measure(
                run,
                pipeline_command(lake, broker.servers, once=True, connector=connector),
                runs_dir / f"{run}.log",
                lake / "_checkpoints" / PIPELINE,
                wait_idle_s=args.wait_idle,
            )
            if run == "pipeline":
                result["rows"] = {
                    "tables": table_rows(lake),
                    "topic_messages": count_messages(broker.servers, ALERT_TOPIC),
                }
        for kind in BASELINES if args.baselines else ():
            checkpoint = runs_dir / f"{kind}-checkpoint"
            shutil.rmtree(checkpoint, ignore_errors=True)
            runs[kind] = measure(
                kind,
                baseline_command(kind, broker.servers, checkpoint),
                runs_dir / f"{kind}.log",
                checkpoint,
                wait_idle_s=args.wait_idle,
            )
    finally:
        broker.stop()

    if not args.skip_latency:
        result["latency"] = measure_latency(workdir, args.latency_seconds, args.seed)

    print("\npipeline report:")
    for line in runs["pipeline"].report:
        print(f"  {line}")
    result["runs"] = run_figures(args.events, runs)
    result["workdir"] = str(workdir)
    print_figures(result)
    out = workdir / "sensor_cep_figures.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"\nfigures written to {out}")
    failed = any(m.exit_code != 0 for m in runs.values())
    lat = result.get("latency")
    failed |= bool(lat) and (lat.get("exit_code") != 0 or "error" in lat)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
