"""Benchmark: `runner.py query` on DuckDB (the default) against `--engine spark`.

Builds a 1,000,000-row events-like Delta table (customer_id, event_time, event_type, price,
quantity, event_date) in the workdir, or reuses it, then times a typical aggregate as
subprocesses, ``python runner.py query SQL --format json --engine duckdb|spark``, N runs each
(interpreter and, for Spark, JVM start-up included), and the DuckDB path in-process
(``engine.query.duckdb.run_duckdb``: delta-rs read, transpile, DuckDB; no interpreter start).
Prints median, min and max per engine and the ratio spark/duckdb; writes them to
``<workdir>/query_figures.json``. It asserts nothing about timings.

Usage: ``.venv/bin/python bench/bench_query.py [--rows N] [--runs N] [--workdir DIR]``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from common import PROJECT_DIR

SQL = (
    "SELECT event_date, event_type, count(*) AS events, count(DISTINCT customer_id) AS customers, "
    "sum(price * quantity) AS amount, avg(price) AS avg_price "
    "FROM events GROUP BY event_date, event_type ORDER BY event_date, event_type"
)


def build_table(lake: Path, rows: int) -> Path:
    """The events table with `rows` rows, written once with delta-rs (reused if it has them)."""
    import numpy as np
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    path = lake / "events"
    if DeltaTable.is_deltatable(str(path)) and DeltaTable(str(path)).count() == rows:
        return lake
    rng = np.random.default_rng(0)
    start = dt.datetime(2024, 6, 1, tzinfo=dt.UTC).timestamp() * 1_000_000
    micros = np.sort(rng.integers(0, 7 * 86_400 * 1_000_000, rows)) + int(start)
    event_time = pa.array(micros, pa.timestamp("us", tz="UTC"))
    types = np.array(["product_view", "add_to_cart", "purchase", "logout"])
    table = pa.table(
        {
            "customer_id": pa.array([f"{i}_CId" for i in rng.integers(1000, 21000, rows)]),
            "event_time": event_time,
            "event_type": pa.array(types[rng.integers(0, len(types), rows)]),
            "price": pa.array(np.round(rng.uniform(0.5, 500, rows), 2)),
            "quantity": pa.array(rng.integers(1, 5, rows).astype("int32")),
            "event_date": event_time.cast(pa.date32()),
        }
    )
    write_deltalake(str(path), table, mode="overwrite", partition_by=["event_date"])
    return lake


def time_cli(lake: Path, engine: str, runs: int) -> list[float]:
    """Wall seconds of `runner.py query` subprocesses; the first output is checked to be JSON."""
    times = []
    for _ in range(runs):
        began = time.perf_counter()
        result = subprocess.run(
            [
                sys.executable,
                str(PROJECT_DIR / "runner.py"),
                "query",
                SQL,
                "--lake",
                str(lake),
                "--format",
                "json",
                "--engine",
                engine,
            ],
            cwd=PROJECT_DIR,
            capture_output=True,
            text=True,
            check=True,
        )
        times.append(time.perf_counter() - began)
        json.loads(result.stdout)
    return times


def time_in_process(lake: Path, runs: int) -> list[float]:
    """Wall seconds of the DuckDB path called in this process (no interpreter start)."""
    from engine.query.duckdb import run_duckdb

    times = []
    for _ in range(runs):
        began = time.perf_counter()
        run_duckdb(SQL, lake)
        times.append(time.perf_counter() - began)
    return times


def summary(times: list[float]) -> dict[str, float]:
    """Median, min and max of the times."""
    return {"median": statistics.median(times), "min": min(times), "max": max(times)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--workdir", default=str(PROJECT_DIR / "bench" / "out"))
    args = parser.parse_args()
    workdir = Path(args.workdir).resolve()
    lake = build_table(workdir / f"query-lake-n{args.rows}", args.rows)
    figures = {
        "rows": args.rows,
        "runs": args.runs,
        "sql": SQL,
        "duckdb (subprocess)": summary(time_cli(lake, "duckdb", args.runs)),
        "spark (subprocess)": summary(time_cli(lake, "spark", args.runs)),
        "duckdb (in-process)": summary(time_in_process(lake, args.runs)),
    }
    ratio = figures["spark (subprocess)"]["median"] / figures["duckdb (subprocess)"]["median"]
    figures["spark/duckdb (median, subprocess)"] = ratio
    print(f"query over {args.rows:,} rows, {args.runs} runs each: {SQL}")
    for name in ("duckdb (subprocess)", "spark (subprocess)", "duckdb (in-process)"):
        f = figures[name]
        print(
            f"{name:<22} median {f['median']:7.2f} s  min {f['min']:7.2f} s  max {f['max']:7.2f} s"
        )
    print(f"spark/duckdb (median, subprocess): {ratio:.1f}x")
    (workdir / "query_figures.json").write_text(json.dumps(figures, indent=2) + "\n")
    print(f"figures: {workdir / 'query_figures.json'}")


if __name__ == "__main__":
    main()
