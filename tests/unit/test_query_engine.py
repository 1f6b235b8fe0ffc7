"""`query` on the embedded DuckDB engine and `history`, without Spark."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

from engine.adhoc import LATEST, Snapshot, parse_query
from engine.errors import UserError
from engine.history import table_history
from engine.query_engine import connect, run_duckdb, to_duckdb_sql
from tests.conftest import PROJECT
from tests.query_lake import build_lake


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_lake(tmp_path_factory.mktemp("query") / "lake")


def rows(sql: str, lake: Path, snapshot: Snapshot = LATEST) -> list[tuple]:
    return [tuple(r.values()) for r in run_duckdb(sql, lake, snapshot).to_pylist()]


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        (
            "SELECT window(event_time, '5 minutes').start AS s, count(*) AS n FROM events "
            "WHERE event_date = '2024-06-01' GROUP BY 1 ORDER BY 1",
            [
                ("2024-06-01 10:00:00+00:00", 2),
                ("2024-06-01 10:05:00+00:00", 1),
                ("2024-06-01 11:55:00+00:00", 1),
            ],
        ),
        (
            "SELECT unix_timestamp(event_time) AS u FROM events ORDER BY u LIMIT 1",
            [(1717236090,)],
        ),
        (
            "SELECT id, tag FROM tags LATERAL VIEW OUTER explode(tags) t AS tag ORDER BY id, tag",
            [(1, "a"), (1, "b"), (2, None), (3, None), (4, "b")],
        ),
        ("SELECT id FROM tags LATERAL VIEW explode(tags) t AS tag WHERE tag = 'b'", [(1,), (4,)]),
        ("SELECT sum(quantity) AS q FROM events", [(8,)]),
        ("SELECT date_add(day, 1) AS d FROM tags WHERE id = 1", [("2024-02-01",)]),
        ("SELECT info.k FROM tags WHERE info.n = 3", [(None,)]),
    ],
)
def test_duckdb_rows(lake, sql, expected):
    got = [
        tuple(str(v) if v is not None and not isinstance(v, int) else v for v in r)
        for r in rows(sql, lake)
    ]
    assert got == expected


@pytest.mark.parametrize(
    "sql",
    [
        "INSERT INTO events SELECT * FROM events",
        "INSERT OVERWRITE TABLE carts SELECT * FROM carts",
        "UPDATE carts SET total_items = 0",
        "DELETE FROM carts",
        "MERGE INTO carts t USING carts s ON t.customer_id = s.customer_id "
        "WHEN MATCHED THEN DELETE",
        "CREATE TABLE x AS SELECT 1",
        "CREATE OR REPLACE TEMP VIEW v AS SELECT 1",
        "DROP TABLE carts",
        "ALTER TABLE carts ADD COLUMNS (x INT)",
        "COPY carts TO '/tmp/carts.csv'",
        "ATTACH '/tmp/x.db' AS x",
        "PRAGMA version",
        "SET enable_external_access = true",
        "CALL pragma_version()",
        "SELECT 1; SELECT 2",
        "SELECT 1; DROP TABLE carts",
        "WITH x AS (SELECT 1) INSERT INTO carts SELECT * FROM x",
        "SELECT * FROM read_csv('/etc/passwd')",
        "SELECT * FROM read_parquet('lake/events/*.parquet')",
        "SELECT * FROM parquet.`lake/events`",
    ],
)
def test_only_one_query_is_accepted(sql):
    with pytest.raises(UserError, match=r"read-only|only the lake's tables|^query: "):
        parse_query(sql)


def test_duckdb_cannot_reach_files(lake, tmp_path):
    # Even SQL that got past the check could neither read nor write files: the connection
    # loses file-system access (locked) once the tables are registered, which still read.
    con = connect({"t": pa.table({"x": [1, 2]})})
    assert con.sql("SELECT sum(x) FROM t").fetchall() == [(3,)]
    for sql in (
        f"COPY t TO '{tmp_path}/out.csv'",
        "SELECT * FROM read_csv('/etc/passwd')",
        "SET enable_external_access = true",
        f"ATTACH '{tmp_path}/x.db' AS x",
    ):
        with pytest.raises(duckdb.Error):
            con.execute(sql)
    assert list(tmp_path.iterdir()) == []
    assert rows("SELECT count(*) FROM carts", lake) == [(3,)]


def test_unknown_table_and_errors_are_user_errors(lake):
    with pytest.raises(
        UserError, match=r"unknown table 'nope' in .* \(tables: carts, events, tags\)"
    ):
        run_duckdb("SELECT * FROM nope", lake)
    with pytest.raises(UserError, match=r"DuckDB: .*no_col.*--engine spark"):
        run_duckdb("SELECT no_col FROM carts", lake)
    with pytest.raises(UserError, match=r"sliding windows .*--engine spark"):
        run_duckdb("SELECT window(event_time, '1 hour', '10 minutes') FROM events", lake)


def test_version_and_as_of_read_older_rows(lake):
    sql = "SELECT customer_id, total_items FROM carts ORDER BY customer_id"
    assert rows(sql, lake) == [("c1", 2), ("c2", 1), ("c3", 1)]
    assert rows(sql, lake, Snapshot(version=1)) == [("c1", 2), ("c2", 0)]
    assert rows(sql, lake, Snapshot(version=0)) == []
    history = table_history(lake, "carts").to_pylist()
    between = history[1]["timestamp"]  # the time of version 1's commit
    assert rows(sql, lake, Snapshot.parse(None, between.isoformat())) == [("c1", 2), ("c2", 0)]
    with pytest.raises(UserError, match="table 'carts' at --version 9"):
        rows(sql, lake, Snapshot(version=9))
    with pytest.raises(UserError, match="--as-of: not a timestamp"):
        Snapshot.parse(None, "yesterday")


def test_history_shows_commits_newest_first(lake):
    got = [
        {k: r[k] for k in ("version", "operation", "rows_written", "pipeline", "query", "batch_id")}
        for r in table_history(lake, "carts").to_pylist()
    ]
    assert got == [
        {
            "version": 2,
            "operation": "MERGE",
            "rows_written": 2,
            "pipeline": "server_logs",
            "query": "carts",
            "batch_id": 1,
        },
        {
            "version": 1,
            "operation": "MERGE",
            "rows_written": 2,
            "pipeline": "server_logs",
            "query": "carts",
            "batch_id": 0,
        },
        {
            "version": 0,
            "operation": "CREATE TABLE",
            "rows_written": None,
            "pipeline": None,
            "query": None,
            "batch_id": None,
        },
    ]
    events = table_history(lake, "events").to_pylist()
    assert [(r["operation"], r["rows_written"], r["batch_id"]) for r in events[:2]] == [
        ("WRITE", 2, 1),
        ("WRITE", 4, 0),
    ]
    with pytest.raises(UserError, match="history: unknown table 'nope'"):
        table_history(lake, "nope")


def test_transpiled_sql_names_outputs_like_spark():
    sql = to_duckdb_sql(parse_query("SELECT count(*), sum(price), window(ts, '1 hour') FROM t"))
    assert '"count(1)"' in sql and '"sum(price)"' in sql and 'AS "window"' in sql
    assert "TIME_BUCKET" in sql.upper()


def runner(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(PROJECT / "runner.py"), *args],
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_cli_query_history_and_refused_write(lake):
    result = runner(
        "query",
        "SELECT customer_id, total_items FROM carts ORDER BY 1",
        "--lake",
        str(lake),
        "--format",
        "json",
        "--version",
        "1",
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == [
        {"customer_id": "c1", "total_items": 2},
        {"customer_id": "c2", "total_items": 0},
    ]
    history = runner("history", "events", "--lake", str(lake), "--format", "csv")
    assert history.returncode == 0, history.stderr
    assert history.stdout.splitlines()[0] == (
        "version,timestamp,operation,rows_written,pipeline,query,batch_id"
    )
    assert history.stdout.splitlines()[1].endswith(",WRITE,2,server_logs,main,1")
    for sql in ("DELETE FROM carts", "SELECT 1; DROP TABLE carts"):
        refused = runner("query", sql, "--lake", str(lake))
        assert refused.returncode == 2
        lines = [ln for ln in refused.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and "read-only" in lines[0], refused.stderr
        assert refused.stdout == ""
