"""`query` on the embedded DuckDB engine and `history`, without Spark."""

from __future__ import annotations

import datetime as dt
import io
import json
import re
import subprocess
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from engine.errors import UserError
from engine.lake import LATEST, Snapshot
from engine.lake.history import table_history
from engine.query import READ_ONLY, parse_query
from engine.query.catalog import catalog_answer
from engine.query.duckdb import connect, run_duckdb, to_duckdb_sql
from engine.query.functions import _SYNTAX, allowed_functions, refused_functions
from engine.query.output import print_rows
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
        # Spark's pipe syntax; sqlglot's own LIMIT step failed on a query without a LIMIT.
        ("SELECT id FROM tags |> ORDER BY id |> LIMIT 2", [(1,), (2,)]),
        # `TABLE t`, a lone VALUES and a table's name in another case are queries as in Spark
        ("TABLE tags |> AGGREGATE count(*)", [(4,)]),
        ("SELECT count(*) FROM TAGS WHERE id IN (TABLE Tags |> SELECT id)", [(4,)]),
        ("VALUES (1, 'a'), (2, 'b') ORDER BY 1 DESC LIMIT 1", [(2, "b")]),
        ("SELECT id FROM tags |> WHERE id > 1 |> ORDER BY id |> LIMIT 1 OFFSET 1", [(3,)]),
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


def test_a_syntax_error_says_where_in_the_words_of_sql():
    with pytest.raises(UserError) as caught:
        parse_query("SELECT customer_id\nFROM")
    assert str(caught.value) == (
        "query: line 2, col 4: Expected table name but got the end of the text"
    )


def test_a_parser_failure_is_a_one_line_refusal(monkeypatch):
    # sqlglot raising other than its own errors (an AttributeError on a form it half knows)
    # was `error: 'NoneType' object has no attribute ...`, exit 1.
    def fails(*_args: object, **_kwargs: object) -> None:
        raise AttributeError("'NoneType' object has no attribute 'expression'")

    monkeypatch.setattr("engine.definitions.syntax.sqlglot.parse", fails)
    with pytest.raises(
        UserError,
        match=r"^query: sqlglot, which reads the SQL here, failed on it \(AttributeError: ",
    ):
        parse_query("SELECT 1")


@pytest.mark.parametrize(
    ("sql", "error"),
    [
        ("SELECT", "SELECT names no columns (name them, or SELECT *)"),
        ("SELECT DISTINCT FROM carts", "SELECT names no columns (name them, or SELECT *)"),
        ("SELECT customer_id, FROM carts", "line 1, col 19: nothing after this comma"),
        ("SELECT customer_id FROM carts c,", "line 1, col 32: nothing after this comma"),
        ("SELECT a FROM carts GROUP BY a,\nORDER BY 1", "line 1, col 31: nothing after this comma"),
        ("SELECT count(*) FROM carts GROUP BY", "GROUP BY names nothing to group by"),
    ],
)
def test_clauses_spark_refuses_as_incomplete_are_refused_before_either_engine(sql, error):
    # sqlglot read them as empty clauses; DuckDB then said "not found in FROM clause" or
    # "try --engine spark", where Spark fails on them as well.
    with pytest.raises(UserError) as caught:
        parse_query(sql)
    assert str(caught.value) == f"query: {error}"


def test_a_comma_inside_text_or_before_more_is_read():
    tree = parse_query("SELECT 'a, FROM', customer_id FROM carts GROUP BY ALL")
    assert len(tree.expressions) == 2


@pytest.mark.parametrize(
    ("sql", "clause"),
    [
        ("SELECT * FROM carts VERSION AS OF 1", "carts VERSION AS OF 1"),
        ("SELECT * FROM carts FOR VERSION AS OF 1", "carts VERSION AS OF 1"),
        ("SELECT * FROM carts TIMESTAMP AS OF '2024-06-01'", "carts TIMESTAMP AS OF '2024-06-01'"),
        ("SELECT * FROM carts@v1", "carts@v1"),
        ("SELECT * FROM carts@1", "carts@1"),
    ],
)
def test_time_travel_in_the_sql_points_to_the_options(sql, clause):
    # DuckDB failed to parse it and said "try --engine spark", where it fails as well.
    with pytest.raises(UserError) as caught:
        parse_query(sql)
    assert str(caught.value) == (
        f"query: {clause}: give the version with --version N or --as-of TIMESTAMP (every table "
        "is read at it)"
    )


BINDS_NONE = "a parameter, and query binds none: write the value in the SQL"
NO_VARIABLES = "not Spark SQL here (no @ variables; ${...} is not substituted)"


@pytest.mark.parametrize(
    ("sql", "error"),
    [
        ("SELECT * FROM carts WHERE customer_id = :who", f":who: {BINDS_NONE}"),
        ("SELECT * FROM carts WHERE total_items > ?", f"?: {BINDS_NONE}"),
        ("SELECT @n AS n FROM carts", f"@n: {NO_VARIABLES}"),
        ("SELECT customer_id AS @who FROM carts", f"@who: {NO_VARIABLES}"),
        ("SELECT ${limit} AS n FROM carts", f"${{limit}}: {NO_VARIABLES}"),
    ],
)
def test_parameters_and_variables_are_refused_before_either_engine(sql, error):
    # DuckDB asked for values (or read `@x` as `$x`) and said "try --engine spark"; Spark fails
    # on them as well.
    with pytest.raises(UserError) as caught:
        parse_query(sql)
    assert str(caught.value) == f"query: {error}"


def test_text_that_only_looks_like_a_parameter_is_read():
    assert len(parse_query("SELECT '@n', ':who', '?', `@x` FROM carts").expressions) == 4


@pytest.mark.parametrize(
    ("sql", "error"),
    [
        (
            "SELECT custmer_id FROM events",
            'Referenced column "custmer_id" not found in FROM clause! (did you mean customer_id?)',
        ),
        ("SELECT e.nope FROM events e", 'Values list "e" does not have a column named "nope"'),
        (
            "SELECT e.custmer_id FROM events e",
            'Values list "e" does not have a column named "custmer_id" (did you mean customer_id?)',
        ),
        ("SELECT x.customer_id FROM events e", 'Referenced table "x" not found!'),
        (
            "SELECT evts.customer_id FROM events evt",
            'Referenced table "evts" not found! (did you mean evt?)',
        ),
        (
            "SELECT customer_id, count(*) AS n FROM events",
            'column "customer_id" must appear in the GROUP BY clause or must be part of an '
            "aggregate function.",
        ),
        (
            "SELECT customer_id FROM events a JOIN events b USING (event_type)",
            "Ambiguous reference to column name \"customer_id\" (use: 'a.customer_id' or "
            "'b.customer_id')",
        ),
    ],
)
def test_a_misnamed_column_has_no_hint_to_try_spark(lake, sql, error):
    # Spark fails on it as well: "(try --engine spark)" sent the user to a second failure. A
    # close name among those DuckDB lists is suggested, as Spark does.
    with pytest.raises(UserError) as caught:
        run_duckdb(sql, lake)
    assert str(caught.value) == f"query: DuckDB: Binder Error: {error}"


@pytest.mark.parametrize(
    ("sql", "error"),
    [
        ("SELECT 2147483647 * 2 AS x", "Out of Range Error: Overflow in multiplication of INT32"),
        ("SELECT CAST(3000000000 AS INT) AS x", "Conversion Error: Type INT64 with value"),
    ],
)
def test_an_overflow_has_no_hint_to_try_spark(lake, sql, error):
    # Spark stops there too (ARITHMETIC_OVERFLOW, CAST_OVERFLOW)
    with pytest.raises(UserError) as caught:
        run_duckdb(sql, lake)
    assert str(caught.value).startswith(f"query: DuckDB: {error}")
    assert "try --engine spark" not in str(caught.value)


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
        UserError, match=r"unknown table 'nope' in .* \(tables: carts, events, odd, tags\)"
    ):
        run_duckdb("SELECT * FROM nope", lake)
    with pytest.raises(UserError, match=r"DuckDB: .*no_col\" not found in FROM clause!$"):
        run_duckdb("SELECT no_col FROM carts", lake)
    with pytest.raises(UserError, match=r"EXPLAIN shows Spark's plan, .*: add --engine spark$"):
        run_duckdb("EXPLAIN SELECT * FROM carts", lake)
    with pytest.raises(UserError, match=r"sliding windows .*--engine spark"):
        run_duckdb("SELECT window(event_time, '1 hour', '10 minutes') FROM events", lake)
    with pytest.raises(UserError, match=r"the start time must be less than the slide$"):
        run_duckdb("SELECT window(event_time, '1 hour', '1 hour', '1 hour') FROM events", lake)


@pytest.mark.parametrize(
    ("sql", "why"),
    [
        (
            "SELECT count(*) AS n FROM events e JOIN carts c USING (customer_id) "
            "GROUP BY session_window(e.event_time, '5 minutes')",
            "a query reading one table, without joins, is translated",
        ),
        (
            "SELECT count(*) AS n FROM events GROUP BY session_window(event_time, source)",
            "a gap written as a literal like '5 minutes' is translated",
        ),
        (
            "SELECT session_window(event_time, '5 minutes').start AS s, count(*) AS n "
            "FROM events GROUP BY 1",
            "the window itself must be in the GROUP BY",
        ),
    ],
)
def test_session_windows_the_translation_does_not_cover_have_the_hint(lake, sql, why):
    with pytest.raises(UserError) as caught:
        run_duckdb(sql, lake)
    assert str(caught.value) == (
        f"query: session_window(): {why} on the DuckDB engine (try --engine spark)"
    )


def test_version_and_as_of_read_older_rows(lake):
    sql = "SELECT customer_id, total_items FROM carts ORDER BY customer_id"
    assert rows(sql, lake) == [("c1", 2), ("c2", 1), ("c3", 1)]
    assert rows(sql, lake, Snapshot(version=1)) == [("c1", 2), ("c2", 0)]
    assert rows(sql, lake, Snapshot(version=0)) == []
    history = table_history(lake, "carts").to_pylist()
    between = history[1]["timestamp"]  # the time of version 1's commit
    assert rows(sql, lake, Snapshot.parse(None, between.isoformat())) == [("c1", 2), ("c2", 0)]
    created = history[-1]["timestamp"]  # version 0: the table is there, empty
    assert rows(sql, lake, Snapshot.parse(None, created.isoformat())) == []
    earlier = created - dt.timedelta(milliseconds=1)
    with pytest.raises(UserError) as before:
        rows(sql, lake, Snapshot.parse(None, earlier.isoformat()))
    utc = lambda t: f"{t:%Y-%m-%d %H:%M:%S.%f}"[:-3] + " UTC"  # noqa: E731
    assert str(before.value) == (
        f"query: table 'carts' did not exist yet at --as-of {utc(earlier)}: "
        f"its earliest version (0) is from {utc(created)}"
    )
    with pytest.raises(UserError, match=r"table 'carts' has versions 0 to \d+, not --version 9$"):
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
    newest = table_history(lake, "events", last=2).to_pylist()
    assert [r["version"] for r in newest] == [r["version"] for r in events[:2]]
    with pytest.raises(UserError, match="history: unknown table 'nope'"):
        table_history(lake, "nope")


def test_transpiled_sql_names_outputs_like_spark():
    sql = to_duckdb_sql(parse_query("SELECT count(*), sum(price), window(ts, '1 hour') FROM t"))
    assert '"count(1)"' in sql and '"sum(price)"' in sql and 'AS "window"' in sql
    assert "TIME_BUCKET" in sql.upper()


@pytest.mark.parametrize(
    ("sql", "names"),
    [
        (
            "SELECT sum(price) /* total */, 1 -- ; DROP TABLE events\nFROM events",
            ["sum(price)", "1"],
        ),
        ("SELECT * FROM VALUES (1, 2), (3, 4)", ["col1", "col2"]),
        ("VALUES (1, 2) AS v", ["col1", "col2"]),
        ("FROM events |> AGGREGATE count(*) GROUP BY event_date", ["event_date", "count(1)"]),
    ],
)
def test_outputs_are_named_as_spark_names_them(lake, sql, names):
    # DuckDB named a column with its comment, an inline table's columns col0.., and a pipe
    # step's count count_star().
    assert run_duckdb(sql, lake).column_names == names


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


JVM = "is not allowed: it calls Java methods (query is read-only)"
LINE_SEP = "'java.lang.System', 'lineSeparator'"

# Every call a query makes must be on engine/definitions/spark_functions.txt. (SQL, None when it is
# allowed, else the one-line refusal after "query: "): the escapes of issue 12 and their
# hiding places first, then ordinary analytics that must still run.
CALLS: list[tuple[str, str | None]] = [
    # the JVM: reflection under each name and spelling
    (
        "SELECT reflect('org.apache.hadoop.fs.FileUtil', 'symLink', '/etc/passwd', '/tmp/x')",
        f"reflect() {JVM}",
    ),
    ("SELECT reflect('java.io.File', 'createTempFile', 'a', 'b')", f"reflect() {JVM}"),
    ("SELECT java_method('java.lang.System', 'getenv', 'HOME')", f"java_method() {JVM}"),
    ("SELECT try_reflect('java.lang.System', 'getenv', 'HOME')", f"try_reflect() {JVM}"),
    (f"SELECT REFLECT({LINE_SEP})", f"reflect() {JVM}"),
    ("SELECT `java_method`('java.lang.System', 'getenv', 'HOME')", f"java_method() {JVM}"),
    (
        f"SELECT system.builtin.reflect({LINE_SEP})",
        "system.builtin.reflect(): call functions by their plain name",
    ),
    # ... hidden in other clauses, lambdas, windows, generators, hints, subqueries, CTEs
    (
        "SELECT customer_id FROM events WHERE source = java_method('java.lang.System', "
        "'getenv', 'USER')",
        f"java_method() {JVM}",
    ),
    (f"SELECT customer_id FROM events ORDER BY reflect({LINE_SEP})", f"reflect() {JVM}"),
    (f"WITH x AS (SELECT reflect({LINE_SEP}) AS r) SELECT * FROM x", f"reflect() {JVM}"),
    (f"SELECT * FROM events WHERE EXISTS (SELECT reflect({LINE_SEP}))", f"reflect() {JVM}"),
    (f"SELECT transform(array(1), v -> reflect({LINE_SEP}))", f"reflect() {JVM}"),
    (
        "SELECT max(java_method('java.lang.Math', 'random')) OVER (PARTITION BY customer_id) "
        "FROM events",
        f"java_method() {JVM}",
    ),
    (
        f"SELECT x FROM events LATERAL VIEW explode(array(reflect({LINE_SEP}))) t AS x",
        f"reflect() {JVM}",
    ),
    (f"SELECT /*+ REPARTITION(2, reflect({LINE_SEP})) */ * FROM events", f"reflect() {JVM}"),
    (f"SELECT array(reflect({LINE_SEP}))[0]", f"reflect() {JVM}"),  # sqlglot once lost it
    # Spark and the check agree where a raw string and a nested comment end
    (f"SELECT r'\\', reflect({LINE_SEP}) --'", f"reflect() {JVM}"),
    (f"SELECT /* /* */ 1 */ reflect({LINE_SEP})", f"reflect() {JVM}"),
    # files and parsers that can read them: XML, protobuf descriptors, Avro; scripts
    ("SELECT xpath_string('<a>b</a>', 'a')", "xpath_string() is not allowed: "),
    ("SELECT from_xml('<a>1</a>', 'a INT')", "from_xml() is not allowed: "),
    ("SELECT from_protobuf(raw, 'M', '/etc/passwd') FROM quarantine", "from_protobuf() is not "),
    ("SELECT to_avro(customer_id) FROM events", "to_avro() is not allowed: "),
    ("SELECT input_file_name() FROM events", "input_file_name() is not allowed: "),
    (
        "SELECT TRANSFORM(customer_id) USING 'cat' AS (c) FROM events",
        "TRANSFORM ... USING runs a script: not allowed (read-only)",
    ),
    # table-valued functions, names and SQL made at run time
    (f"EXECUTE IMMEDIATE 'SELECT reflect({LINE_SEP})'", READ_ONLY),
    # EXPLAIN's query is held to the same rules
    ("EXPLAIN INSERT INTO events SELECT * FROM events", READ_ONLY),
    ("EXPLAIN", READ_ONLY),
    (f"EXPLAIN FORMATTED SELECT reflect({LINE_SEP})", f"reflect() {JVM}"),
    ("EXPLAIN COST SELECT count(*) FROM events", None),
    ("SELECT * FROM range(10)", "FROM RANGE(10): only the lake's tables can be read"),
    ("SELECT * FROM IDENTIFIER('events')", "FROM IDENTIFIER('events'): only the lake's"),
    # a Spark user's path or catalog names: the table had its qualifier dropped in the message
    (
        "SELECT * FROM delta.`/data/lake/events`",
        "FROM delta.`/data/lake/events`: only the lake's tables can be read, by their names "
        "alone (FROM events)",
    ),
    ("SELECT * FROM spark_catalog.db.carts c", "FROM spark_catalog.db.carts: only the lake's"),
    ("SELECT IDENTIFIER('customer_id') FROM events", "identifier() is not allowed: "),
    # the environment
    ("SELECT current_user()", "current_user() is not allowed: "),
    ("SELECT current_user", "current_user() is not allowed: "),
    ("SELECT session_user()", "session_user() is not allowed: "),
    ("SELECT user()", "user() is not allowed: "),
    # not on the list at all (DuckDB's getenv, a typo); hints Spark does not define
    ("SELECT getenv('HOME')", "getenv() is not a Spark function (the list: engine/definitions/"),
    ("SELECT cont(*) FROM events", "cont() is not a Spark function; did you mean count()? (the"),
    (
        "SELECT date_trun('hour', event_time) FROM events",
        "date_trun() is not a Spark function; did you mean date_trunc()? (the list: "
        "engine/definitions/spark_functions.txt)",
    ),
    (
        "SELECT to_timestmp('2020-01-01')",
        "to_timestmp() is not a Spark function; did you mean to_timestamp()? (the list: "
        "engine/definitions/spark_functions.txt)",
    ),
    ("SELECT /*+ HACK(1) */ 1", "hint HACK: not a Spark hint"),
    # allowed: variable references are plain text (Spark's substitution is off)
    ("SELECT '${env:HOME}' AS h, '${system:user.name}' AS u", None),
    # allowed: aggregates, window functions, dates, CASE, lambdas, JSON, casts, hints
    (
        "SELECT event_type, count(*), count(DISTINCT customer_id), sum(price), avg(price), "
        "percentile_approx(price, 0.5), collect_set(source), max_by(customer_id, price) "
        "FROM events GROUP BY event_type HAVING count(*) > 0",
        None,
    ),
    (
        "SELECT row_number() OVER (PARTITION BY customer_id ORDER BY event_time), "
        "lag(price, 1) OVER w, sum(price) OVER (ORDER BY event_time ROWS BETWEEN UNBOUNDED "
        "PRECEDING AND CURRENT ROW), first_value(price) IGNORE NULLS OVER w FROM events "
        "WINDOW w AS (PARTITION BY customer_id ORDER BY event_time)",
        None,
    ),
    (
        "SELECT date_trunc('hour', event_time), to_date(event_time), date_format(event_time, "
        "'yyyy-MM'), datediff(current_date(), event_date), date_add(event_date, 1), "
        "extract(YEAR FROM event_time), window(event_time, '5 minutes'), current_timestamp, "
        "unix_timestamp(event_time), event_time + INTERVAL 1 HOUR FROM events",
        None,
    ),
    (
        "SELECT CASE WHEN price > 100 THEN 'big' ELSE 'small' END, if(price IS NULL, 0, 1), "
        "coalesce(price, 0), nvl(quantity, 0), CAST(price AS INT), price::string, "
        "substr(customer_id, 1, 2), trim(source), position('w' IN source), source RLIKE 'w+' "
        "FROM events",
        None,
    ),
    (
        "SELECT transform(tags, x -> upper(x)), filter(tags, x -> x <> 'a'), "
        "aggregate(tags, '', (acc, x) -> concat(acc, x)), exists(tags, x -> x = 'b') FROM tags",
        None,
    ),
    (
        "SELECT get_json_object('{\"a\": 1}', '$.a'), from_json('{\"a\": 1}', 'a INT'), "
        "to_json(named_struct('k', 1)), json_tuple('{\"a\": 1}', 'a')",
        None,
    ),
    ("SELECT /*+ BROADCAST(c), REPARTITION(2) */ * FROM events e JOIN carts c USING (x)", None),
]


@pytest.mark.parametrize(("sql", "refusal"), CALLS)
def test_only_allowed_functions_are_called(sql, refusal):
    if refusal is None:
        parse_query(sql)
        return
    with pytest.raises(UserError) as err:
        parse_query(sql)
    assert str(err.value).startswith("query: " + refusal), str(err.value)
    assert "\n" not in str(err.value)


def test_every_refused_spark_function_is_refused_by_name():
    allowed, refused = allowed_functions(), refused_functions()
    assert {"reflect", "java_method", "try_reflect", "current_user"} <= set(refused)
    assert not set(refused) & allowed
    for name, reason in refused.items():
        with pytest.raises(UserError, match=re.escape(f"query: {name}() is not allowed: {reason}")):
            parse_query(f"SELECT {name}()")
    # What sqlglot builds from syntax stands for a function on the list too.
    assert {n for n in _SYNTAX.values() if n} <= allowed | set(refused)


ODD_JSON = [
    {
        "id": 1,
        "text": "ok",
        "price": 1.5,
        "item": {"k": "ok", "x": 0.5},
        "prices": [1.0, "NaN"],
    },
    {
        "id": 2,
        "text": "caf\\xe9",
        "price": "NaN",
        "item": {"k": "caf\\xe9", "x": "Infinity"},
        "prices": [],
    },
    {"id": 3, "text": None, "price": "Infinity", "item": {"k": None, "x": None}, "prices": None},
    {
        "id": 4,
        "text": "\\xff\\xfeA",
        "price": "-Infinity",
        "item": {"k": "\\xff\\xfeA", "x": "NaN"},
        "prices": ["-Infinity"],
    },
    {
        "id": 5,
        "text": "Zürich",
        "price": None,
        "item": {"k": "Zürich", "x": 2.0},
        "prices": [2.5],
    },
]


def strict_json(text: str) -> Any:
    """JSON as the standard has it: NaN and Infinity are not numbers there."""

    def refuse(token: str) -> Any:
        raise ValueError(f"not JSON: {token}")

    return json.loads(text, parse_constant=refuse)


def printed(sql: str, lake: Path, fmt: str) -> str:
    out = io.StringIO()
    print_rows(run_duckdb(sql, lake), fmt, out)  # type: ignore[arg-type]
    return out.getvalue()


def test_any_stored_value_prints_in_every_format(lake):
    sql = "SELECT * FROM odd ORDER BY id"
    assert strict_json(printed(sql, lake, "json")) == ODD_JSON
    assert printed(sql, lake, "csv").splitlines()[1:5] == [
        '1,ok,1.5,"{""k"": ""ok"", ""x"": 0.5}","[1.0, ""NaN""]"',
        '2,caf\\xe9,NaN,"{""k"": ""caf\\\\xe9"", ""x"": ""Infinity""}",[]',
        '3,,Infinity,"{""k"": null, ""x"": null}",',
        '4,\\xff\\xfeA,-Infinity,"{""k"": ""\\\\xff\\\\xfeA"", ""x"": ""NaN""}","[""-Infinity""]"',
    ]
    table = printed(sql, lake, "table").splitlines()
    assert table[4].split("|")[1:4] == [" 2  ", " caf\\xe9   ", " NaN       "]
    assert table[-1] == "(5 rows)"
    # The DuckDB engine reads invalid text as printed, so its string functions work on it.
    assert strict_json(printed("SELECT upper(text) AS u FROM odd WHERE id = 2", lake, "json")) == [
        {"u": "CAF\\XE9"}
    ]


def test_values_python_cannot_hold_still_print():
    far = pa.array([dt.datetime(2024, 1, 1), None], pa.timestamp("us", tz="UTC"))
    far = pc.add(far, pa.scalar(dt.timedelta(days=3_000_000)))  # about year 10237
    result = pa.table({"t": far, "b": pa.array([b"\x00\xff", None])})
    out = io.StringIO()
    print_rows(result, "json", out)
    assert strict_json(out.getvalue()) == [
        {"t": "10237-09-21 00:00:00.000000Z", "b": "AP8="},
        {"t": None, "b": None},
    ]


def test_a_map_prints_as_a_json_object_its_keys_as_text():
    # as Spark's to_json writes a map (the entries printed as pairs of a list)
    by_text = pa.array([[("a", 1), ("b", None)], [], None], pa.map_(pa.string(), pa.int64()))
    by_date = pa.array([[(dt.date(2024, 1, 1), True)]] * 3, pa.map_(pa.date32(), pa.bool_()))
    # a key no JSON object can have stays a pair, as before
    by_struct = pa.array(
        [[({"x": 1}, 2)], None, []], pa.map_(pa.struct([("x", pa.int64())]), pa.int64())
    )
    result = pa.table({"m": by_text, "d": by_date, "s": by_struct})
    out = io.StringIO()
    print_rows(result, "json", out)
    assert strict_json(out.getvalue()) == [
        {"m": {"a": 1, "b": None}, "d": {"2024-01-01": True}, "s": [[{"x": 1}, 2]]},
        {"m": {}, "d": {"2024-01-01": True}, "s": None},
        {"m": None, "d": {"2024-01-01": True}, "s": []},
    ]
    out = io.StringIO()
    print_rows(result.select(["m"]), "table", out)
    assert out.getvalue().splitlines()[3] == '| {"a": 1, "b": null} |'


@pytest.mark.parametrize(
    ("column", "text"),
    [
        # Spark hands a day-time interval over as a duration (json said "timedelta is not JSON")
        (pa.array([dt.timedelta(days=614)]), "INTERVAL '614 00:00:00' DAY TO SECOND"),
        (pa.array([dt.timedelta(hours=-106)]), "INTERVAL '-4 10:00:00' DAY TO SECOND"),
        (
            pa.array([dt.timedelta(seconds=1, microseconds=250000)]),
            "INTERVAL '0 00:00:01.25' DAY TO SECOND",
        ),
        # DuckDB hands intervals over as months, days and nanoseconds (printed as a list)
        (
            pa.array([pa.MonthDayNano([0, 3, 5_400_000_000_000])], pa.month_day_nano_interval()),
            "INTERVAL '3 01:30:00' DAY TO SECOND",
        ),
        (
            pa.array([pa.MonthDayNano([-14, 0, 0])], pa.month_day_nano_interval()),
            "INTERVAL '-1-2' YEAR TO MONTH",
        ),
    ],
)
def test_an_interval_prints_as_spark_casts_it_to_text(column, text):
    for fmt, shown in [("json", f'[{{"i": "{text}"}}]'), ("csv", f"i\n{text}")]:
        out = io.StringIO()
        print_rows(pa.table({"i": column}), fmt, out)
        assert out.getvalue().strip().replace("\r", "") == shown


def test_cli_refuses_escapes_in_one_line_before_any_engine(lake, tmp_path):
    target = tmp_path / "link"
    for engine in ("spark", "duckdb"):
        for sql, message in [
            (
                "SELECT reflect('org.apache.hadoop.fs.FileUtil', 'symLink', '/etc/passwd', "
                f"'{target}')",
                f"error: query: reflect() {JVM}",
            ),
            (
                "SELECT java_method('java.lang.System', 'getenv', 'HOME')",
                f"error: query: java_method() {JVM}",
            ),
            (
                "EXECUTE IMMEDIATE 'SELECT 1'",
                f"error: query: {READ_ONLY}",
            ),
        ]:
            refused = runner("query", sql, "--lake", str(lake), "--engine", engine)
            assert refused.returncode == 2, refused.stderr
            assert refused.stderr.splitlines() == [message]
            assert refused.stdout == ""
    assert not target.exists() and not target.is_symlink()
    printed = runner(
        "query", "SELECT * FROM odd ORDER BY id", "--lake", str(lake), "--format", "json"
    )
    assert printed.returncode == 0, printed.stderr
    assert strict_json(printed.stdout) == ODD_JSON


def test_a_bare_user_must_be_a_column(lake):
    # Spark reads a bare `user` that names no column as user(): the account it runs as.
    with pytest.raises(UserError, match=r"^query: user: no such column, and Spark would read"):
        run_duckdb("SELECT user FROM events", lake)
    sql = "WITH x AS (SELECT customer_id AS user FROM events) SELECT count(DISTINCT user) FROM x"
    assert rows(sql, lake) == [(3,)]
    assert rows("SELECT count(*) FROM carts c WHERE c.customer_id <> 'user'", lake) == [(3,)]


@pytest.mark.parametrize("name", ["hash", "xxhash64", "HASH"])
def test_a_hash_duckdb_computes_otherwise_is_refused(name):
    # DuckDB's hash('c1') is 13309222064576632493, Spark's -1307940722: a wrong number, quietly.
    with pytest.raises(UserError) as caught:
        to_duckdb_sql(parse_query(f"SELECT {name}(customer_id, 1) AS h FROM carts"))
    assert str(caught.value) == (
        f"query: {name.lower()}(): DuckDB's function of that name computes another hash than "
        "Spark's (try --engine spark)"
    )


def test_format_string_of_a_null_stops_on_duckdb(lake):
    # Spark prints a NULL argument as 'null' ('c2-null'); DuckDB's printf gives NULL for all.
    with pytest.raises(UserError) as caught:
        run_duckdb("SELECT format_string('%s-%d', customer_id, quantity) AS b FROM events", lake)
    assert str(caught.value) == (
        "query: DuckDB: Invalid Input Error: format_string() of a NULL: Spark prints it as "
        "'null', DuckDB's printf cannot (try --engine spark)"
    )


@pytest.mark.parametrize("count", ["count(DISTINCT price)", "approx_count_distinct(price)"])
def test_a_distinct_count_in_a_pivot_is_refused_on_duckdb(count):
    # Its empty cells would be 0 on DuckDB, NULL on Spark; no one aggregate gives Spark's.
    sql = f"SELECT * FROM (SELECT source, price FROM events) PIVOT ({count} FOR source IN ('a'))"
    with pytest.raises(UserError) as caught:
        to_duckdb_sql(parse_query(sql))
    assert str(caught.value) == (
        "query: PIVOT: a distinct count of a cell without rows is NULL on Spark, 0 on DuckDB "
        "(try --engine spark)"
    )


@pytest.mark.parametrize(
    ("value", "text"),
    [
        # Java's Double.toString, as Spark writes a DOUBLE: decimals from 0.001 up to 1e7
        ("1234567.5D", "1234567.5"),
        ("0.001D", "0.001"),
        ("100D", "100.0"),
        ("0.0D", "0.0"),
        ("0.1D + 0.2D", "0.30000000000000004"),
        # DuckDB wrote these as decimals (up to 1e16, from 1e-4): 10000000000.0, 0.0009
        ("1e7D", "1.0E7"),
        ("-12345678.9D", "-1.23456789E7"),
        ("1e15D", "1.0E15"),
        ("0.0009D", "9.0E-4"),
        ("-0.00012D", "-1.2E-4"),
        # and these with a small e and a sign: 1e-05, 1.5e+300, 1e+16
        ("1e-5D", "1.0E-5"),
        ("1.5e300D", "1.5E300"),
        ("1e16D", "1.0E16"),
        ("CAST('NaN' AS DOUBLE)", "NaN"),
        ("-CAST('Infinity' AS DOUBLE)", "-Infinity"),
        ("CAST(12345678.0 AS FLOAT)", "1.2345678E7"),
        # a DECIMAL below 1 keeps its 0 (DuckDB wrote .25 for a DECIMAL(2, 2))
        ("CAST(0.25 AS DECIMAL(2, 2))", "0.25"),
        ("CAST(-0.5 AS DECIMAL(1, 1))", "-0.5"),
        # what is no DOUBLE is DuckDB's text, as Spark's
        ("12345678.9", "12345678.9"),
        ("12345678", "12345678"),
    ],
)
def test_a_double_as_text_is_written_as_spark_writes_it(lake, value, text):
    sql = f"SELECT CAST({value} AS STRING) AS c, concat('', {value}) AS t, 'x' || {value} AS x"
    assert rows(sql, lake) == [(text, text, f"x{text}")]


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT round(CAST(CAST('7.9' AS INT) AS DOUBLE), 1) AS x",
        "SELECT skewness(CAST('7.9' AS INT)) AS x",
        "SELECT array_distinct(array(CAST('7.9' AS INT))) AS x",
        "SELECT weekday(date_add(DATE '2024-01-01', CAST('7.9' AS INT))) AS x",
    ],
)
def test_a_cast_inside_a_rewritten_operand_stops_as_spark_does(lake, sql):
    # The rewrites wrote their operands as DuckDB text, where Spark's CAST read back as TRY_CAST:
    # NULL, where Spark stops.
    with pytest.raises(UserError, match=r"the value '7\.9' cannot be cast to INT because"):
        run_duckdb(sql, lake)


@pytest.mark.parametrize(
    ("sql", "error"),
    [
        # sqlglot's to_date is Spark's legacy one, NULL for text it cannot read; Spark's stops
        ("SELECT to_date('2024-02-30') AS d", "date field value out of range"),
        ("SELECT to_date('2024-06-01', 'MM/dd/yyyy') AS d", "Could not parse string"),
        # a '$' in a replacement is a group number, as in Java
        ("SELECT regexp_replace('a.b', '\\\\.', '$') AS r", "'$' must be followed by a group"),
        ("SELECT regexp_replace('a.b', '\\\\.', '\\\\') AS r", "ends in a lone"),
    ],
)
def test_what_spark_cannot_read_stops_on_duckdb_too(lake, sql, error):
    with pytest.raises(UserError, match=re.escape(error)):
        run_duckdb(sql, lake)


@pytest.mark.parametrize(
    ("pattern", "text"),
    [
        # as Spark prints 2024-06-05 09:01:30.250 (compared with Spark once); sqlglot's mapping
        # left `DDD`, `yyy`, `LLLL` and quoted letters for DuckDB to print as they were
        ("yyyy-MM-dd HH:mm:ss.SSS", "2024-06-05 09:01:30.250"),
        ("d/M/yy h:m:s a", "5/6/24 9:1:30 AM"),
        ("EEE, d MMM yyyy", "Wed, 5 Jun 2024"),
        ("EEEE LLLL", "Wednesday June"),
        ("DDD D", "157 157"),
        ("yyy", "2024"),
        ("d 'at' h 'o''clock'", "5 at 9 o'clock"),
        ("'100%' yyyy", "100% 2024"),
    ],
)
def test_a_date_pattern_is_read_as_spark_reads_it(lake, pattern, text):
    sql = f'SELECT date_format(TIMESTAMP "2024-06-05 09:01:30.250", "{pattern}") AS f'
    assert rows(sql, lake) == [(text,)]


@pytest.mark.parametrize("pattern", ["k", "YYYY", "MMMMM", "DD", "Q", "z", "SS"])
def test_a_date_pattern_duckdb_has_no_code_for_is_refused(lake, pattern):
    sql = f"SELECT date_format(event_time, '{pattern}') AS f FROM events"
    with pytest.raises(UserError, match=rf"has no '{pattern}' \(try --engine spark\)$"):
        run_duckdb(sql, lake)


def test_a_date_pattern_held_in_a_column_is_refused(lake):
    with pytest.raises(UserError, match="reads a pattern written in the query only"):
        run_duckdb("SELECT date_format(event_time, source) AS f FROM events", lake)


@pytest.mark.parametrize(
    ("call", "value"),
    [
        # as Spark printed each (compared once); DuckDB has none of these functions
        ("try_add(2147483647, 1)", None),
        ("try_add(9223372036854775807L, 1)", None),
        ("try_subtract(-2147483648, 1)", None),
        ("try_multiply(3000000000L, 4000000000L)", None),
        ("try_add(1, 2)", 3),
        ("try_add(DATE '2024-02-28', 2)", dt.date(2024, 3, 1)),
        ("try_add(1.5D, 2)", 3.5),
        ("try_to_date('2024-02-30')", None),
        ("try_to_date('01/02/2024', 'MM/dd/yyyy')", dt.date(2024, 1, 2)),
        ("try_to_date('x', 'yyyy')", None),
        ("bround(2.5D, 0)", 2.0),
        ("bround(3.5D)", 4.0),
        ("bround(0.295D, 2)", 0.3),
        ("bround(0.285D, 2)", 0.28),
        ("bround(35, -1)", 40),
        ("bround(0.125, 2)", Decimal("0.12")),
        ("substring_index('a.b.c', '.', 2)", "a.b"),
        ("substring_index('a::b::c', '::', -2)", "b::c"),
        ("substring_index('a.b.c', '.', -5)", "a.b.c"),
        ("substring_index('a.b.c', '.', 0)", ""),
        ("substring_index('a.b.c', '', 1)", ""),
        ("format_number(1234567.891D, 2)", "1,234,567.89"),
        ("format_number(2.5D, 0)", "2"),
        ("format_number(-0.001D, 2)", "-0.00"),
        ("format_number(-0.001, 2)", "-0.00"),
        ("format_number(0.165, 2)", "0.16"),
        ("format_number(12345678901234567890.125BD, 2)", "12,345,678,901,234,567,890.12"),
        ("format_number(9007199254740993L, 0)", "9,007,199,254,740,993"),
        ("format_number(1e20D, 3)", "100,000,000,000,000,000,000.000"),
        ("format_number(CAST('Infinity' AS DOUBLE), 1)", "∞"),
        ("format_number(1.5D, -1)", None),
        ("reverse(array(1, 2, 3))", [3, 2, 1]),
        ("timestamp_seconds(1717236000)", dt.datetime(2024, 6, 1, 10, tzinfo=dt.UTC)),
        ("timestamp_millis(1717236000123)", dt.datetime(2024, 6, 1, 10, 0, 0, 123000, dt.UTC)),
        ("timestamp_micros(1717236000123456)", dt.datetime(2024, 6, 1, 10, 0, 0, 123456, dt.UTC)),
        # rounded down, as Spark's (sqlglot's cast rounded DuckDB's epoch to 1717236001)
        ("unix_seconds(TIMESTAMP '2024-06-01 10:00:00.75')", 1717236000),
        # DuckDB has no cast between times and numbers
        ("CAST(TIMESTAMP '2024-06-01 10:00:00.75' AS BIGINT)", 1717236000),
        ("CAST(TIMESTAMP '1969-12-31 23:59:59.5' AS BIGINT)", -1),
        ("CAST(TIMESTAMP '2024-06-01 10:00:00.75' AS DOUBLE)", 1717236000.75),
        ("CAST(1717236000.5D AS TIMESTAMP)", dt.datetime(2024, 6, 1, 10, 0, 0, 500000, dt.UTC)),
        ("nanvl(CAST('NaN' AS DOUBLE), 1D)", 1.0),
        ("negative(5)", -5),
        ("positive(-1.5)", Decimal("-1.5")),
        # JSON that does not parse is NULL, as a quarantined line would be (DuckDB stopped)
        ("""get_json_object('{"a":1', '$.a')""", None),
        ("""get_json_object('{"a":[1,2]}', '$.a[1]')""", "2"),
        ("""json_object_keys('[1]')""", None),
        ("""json_object_keys('{"a":1,"b":{}}')""", ["a", "b"]),
        ("""json_array_length('{"a":1}')""", None),
        ("json_array_length('[1,[2,3]]')", 2),
        ("try_parse_json('nope')", None),
        ("exists(array(3, NULL), x -> x > 1)", True),
        ("exists(array(1, NULL), x -> x > 1)", None),
        ("forall(array(0, NULL), x -> x > 0)", False),
        ("forall(CAST(array() AS ARRAY<INT>), x -> x > 0)", True),
        ("width_bucket(5.3, 0.2, 10.6, 5)", 3),
        ("width_bucket(-0.9, 5.2, 0.5, 2)", 3),  # bounds down: after the last bucket
        ("width_bucket(5, 10, 0, 5)", 3),
        ("width_bucket(2, 0, 2, 3)", 4),
        ("width_bucket(-1, 0, 2, 3)", 0),
        ("width_bucket(1, 0, 0, 3)", None),
        ("width_bucket(1, 0, 2, 0)", None),
        ("width_bucket(1, 0, CAST('Infinity' AS DOUBLE), 3)", None),
        ("to_unix_timestamp(TIMESTAMP '2024-06-01 10:00:00.75')", 1717236000),
        ("regexp_substr('1028_CId', '\\\\d+')", "1028"),
        ("regexp_substr('1028_CId', 'zz')", None),
        ("map_contains_key(map('a', 1), 'a')", True),  # sqlglot's DuckDB SQL swapped them
        ("map_contains_key(map('a', 1), 'b')", False),
        ("array_repeat('x', 2)", ["x", "x"]),
        ("array_repeat(1, -1)", []),
        ("array_repeat(1, CAST(NULL AS INT))", None),
        ("zip_with(array(1, 2), array(10, 20), (x, y) -> x + y)", [11, 22]),
        ("zip_with(array(1, 2, 3), array('a'), (x, y) -> concat(x, y))", ["1a", None, None]),
        ("zip_with(CAST(NULL AS ARRAY<INT>), array(1), (x, y) -> x)", None),
        # a field named as a parameter is the field
        (
            "zip_with(array(named_struct('p', 1)), array(named_struct('p', 2)), "
            "(p, q) -> p.p + q.p)",
            [3],
        ),
        # the inner lambda's x is its own
        (
            "zip_with(array(1, 2), array(3, 4), (x, y) -> transform(array(x, y), x -> x * 10))",
            [[10, 30], [20, 40]],
        ),
    ],
)
def test_functions_duckdb_lacks_give_spark_answers(lake, call, value):
    assert rows(f"SELECT {call} AS x", lake) == [(value,)]


@pytest.mark.parametrize(
    ("call", "value"),
    [
        # as Spark printed each (compared once): a unit it does not know gives NULL, where
        # sqlglot read 'Q', 'W', 'D', 'H' as QUARTER, WEEK, DAY, HOUR and DuckDB knows more
        ("trunc(DATE '2024-05-15', 'quarter')", dt.date(2024, 4, 1)),
        ("trunc(DATE '2024-05-15', 'Q')", None),
        ("trunc(DATE '2024-05-15', 'W')", None),
        ("trunc(DATE '2024-05-15', 'DD')", None),  # trunc stops at weeks
        ("trunc(TIMESTAMP '2024-05-15 10:11:12', 'HOUR')", None),
        ("trunc(DATE '2024-05-15', 'fortnight')", None),  # DuckDB stopped: not recognized
        (
            "date_trunc('DD', TIMESTAMP '2024-05-15 10:11:12')",
            dt.datetime(2024, 5, 15, tzinfo=dt.UTC),
        ),
        ("date_trunc('H', TIMESTAMP '2024-05-15 10:11:12')", None),
        ("date_trunc('Q', DATE '2024-05-15')", None),
        ("date_trunc('fortnight', TIMESTAMP '2024-05-15 10:11:12')", None),
    ],
)
def test_a_truncation_unit_spark_does_not_know_gives_null(lake, call, value):
    assert rows(f"SELECT {call} AS x", lake) == [(value,)]


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SHOW TABLES", [("carts",), ("events",), ("odd",), ("tags",)]),
        # Spark's pattern: `*` any text, `|` alternatives, any case, matched whole
        ("show tables like 'E*|TAG*'", [("events",), ("tags",)]),
        ("SHOW TABLES LIKE 'ev'", []),
        ("SHOW TABLES LIKE 'o.d'", [("odd",)]),  # the rest is a regular expression
        ("SHOW COLUMNS FROM tags", [("id",), ("tags",), ("info",), ("day",)]),
        ("SHOW COLUMNS IN `odd`;", [("id",), ("text",), ("price",), ("item",), ("prices",)]),
        # as Spark's DESCRIBE delta.`<path>` printed each (compared once)
        (
            "DESCRIBE carts",
            [
                ("customer_id", "string", "Customer id"),
                ("total_items", "bigint", "Lines in the cart"),
                ("total_price", "double", "Sum of the prices of the lines"),
                (
                    "products",
                    "array<struct<product_id:string,price:double>>",
                    "Cart lines in the order they were added",
                ),
                ("updated_at", "timestamp", "Event time of the latest change"),
            ],
        ),
        (
            "desc table odd",
            [
                ("id", "bigint", None),
                ("text", "string", None),
                ("price", "double", None),
                ("item", "struct<k:string,x:double>", None),
                ("prices", "array<double>", None),
            ],
        ),
        (
            "DESCRIBE events",
            [
                ("customer_id", "string", "Customer id, e.g. 1028_CId"),
                ("event_time", "timestamp", "When the event happened (UTC)"),
                ("event_type", "string", "add_to_cart | product_view | purchase"),
                ("product_id", "string", "Product of this item"),
                ("price", "double", "Unit price; Purchase prices have their $ removed"),
                ("quantity", "int", "Items bought (Purchase), 1 otherwise"),
                ("source", "string", "Site the event came from, or LoggedOut"),
                ("logged_out", "boolean", "The customer logged out with this event"),
                ("event_date", "date", "Date of event_time, the partition column"),
                ("# Partition Information", "", ""),
                ("# col_name", "data_type", "comment"),
                ("event_date", "date", "Date of event_time, the partition column"),
            ],
        ),
        # one column, as Spark's: the name as written, found in any case; 'NULL' for no comment
        (
            "DESC TABLE EXTENDED events EVENT_TIME;",
            [
                ("col_name", "EVENT_TIME"),
                ("data_type", "timestamp"),
                ("comment", "When the event happened (UTC)"),
            ],
        ),
        (
            "DESCRIBE odd `item`",
            [("col_name", "item"), ("data_type", "struct<k:string,x:double>"), ("comment", "NULL")],
        ),
        # Spark's SHOW TBLPROPERTIES: sorted; delta-rs keeps no key of the tool's own
        (
            "SHOW TBLPROPERTIES events",
            [("delta.minReaderVersion", "1"), ("delta.minWriterVersion", "2")],
        ),
        (
            "show tblproperties `events` ('delta.minWriterVersion')",
            [("delta.minWriterVersion", "2")],
        ),
        # comments around the statement, and a table's name in another case
        (
            "/* which */ SHOW TBLPROPERTIES EVENTS ('delta.minWriterVersion') -- one",
            [("delta.minWriterVersion", "2")],
        ),
        (
            "SHOW TBLPROPERTIES events ('lake.mode')",
            [("lake.mode", "Table events does not have property: lake.mode")],
        ),
    ],
)
def test_show_and_describe_answer_from_the_delta_logs(lake, sql, expected):
    answer = catalog_answer(sql, lake)
    assert answer is not None
    assert [tuple(r.values()) for r in answer.to_pylist()] == expected


def test_show_tables_at_a_version_or_time_lists_the_tables_readable_there(lake):
    def shown(snapshot: Snapshot) -> list[str]:
        answer = catalog_answer("SHOW TABLES", lake, snapshot)
        assert answer is not None
        return answer.column("tableName").to_pylist()

    # events and carts have versions 0 to 2, tags and odd only 0; carts came after events.
    assert shown(Snapshot(version=0)) == ["carts", "events", "odd", "tags"]
    assert shown(Snapshot(version=2)) == ["carts", "events"]
    assert shown(Snapshot(version=3)) == []
    created = table_history(lake, "carts").to_pylist()[-1]["timestamp"]
    assert shown(Snapshot(as_of=created)) == ["carts", "events"]
    assert shown(Snapshot(as_of=created - dt.timedelta(milliseconds=1))) == ["events"]


@pytest.mark.parametrize(
    ("sql", "error"),
    [
        ("DESCRIBE HISTORY events", "a table's commits are `runner.py history events`"),
        ("DESCRIBE EXTENDED events", "DESCRIBE EXTENDED events: not answered here"),
        (
            "DESCRIBE HISTORY events LIMIT 1",
            "a table's commits are `runner.py history events --last 1`",
        ),
        ("DESCRIBE FUNCTION upper", "DESCRIBE FUNCTION: not answered here"),
        ("DESCRIBE SELECT 1", "DESCRIBE SELECT: not answered here"),
        ("SHOW CREATE TABLE events", "the table's DDL is tables/events.sql"),
        ("show partitions events", "SHOW PARTITIONS events: a Delta table has no partition"),
        ("desc query with t AS (SELECT 1) SELECT * FROM t", "DESCRIBE QUERY: not answered here"),
        # Spark: partition management is not supported by Delta, nor a nested column
        ("DESC events PARTITION (event_date = '2024-06-01')", "a Delta table has no partition"),
        ("DESCRIBE odd item.k", "DESCRIBE odd item.k: a nested column is not described"),
        ("DESCRIBE odd nope", "DESCRIBE odd: no column 'nope' (columns: id, text, price, item,"),
        # a name of two parts is no table of the lake (it was read as `events`)
        ("DESCRIBE db.events", "unknown table 'db.events'"),
        ("SHOW COLUMNS IN db . `events`", "unknown table 'db.events'"),
        ("DESCRIBE nope", "unknown table 'nope'"),
        ("DESCRIBE DETAIL nope", "unknown table 'nope'"),
        ("SHOW TBLPROPERTIES nope", "unknown table 'nope'"),
        ("SHOW COLUMNS FROM nope", "unknown table 'nope'"),
        ("SHOW TABLES LIKE '('", "SHOW TABLES LIKE '(': missing )"),
    ],
)
def test_show_and_describe_refuse_in_one_line(lake, sql, error):
    with pytest.raises(UserError, match=re.escape(error)):
        catalog_answer(sql, lake)


@pytest.mark.parametrize("sql", ["SELECT 1", "SHOW DATABASES", "DESC", "DESCRIBE a b c"])
def test_other_statements_are_left_to_the_query_check(lake, sql):
    assert catalog_answer(sql, lake) is None


def test_describe_detail_tells_the_files_and_protocol_at_the_snapshot(lake):
    # Delta's DESCRIBE DETAIL, column for column as Spark printed it for this table
    latest = catalog_answer("DESCRIBE DETAIL events", lake)
    first = catalog_answer("describe detail events;", lake, Snapshot(version=0))
    assert latest is not None and first is not None
    assert latest.schema.names == [
        "format", "id", "name", "description", "location", "createdAt", "lastModified",
        "partitionColumns", "clusteringColumns", "numFiles", "sizeInBytes", "properties",
        "minReaderVersion", "minWriterVersion", "tableFeatures",
    ]  # fmt: skip
    now, then = latest.to_pylist()[0], first.to_pylist()[0]
    files = sorted((lake / "events").rglob("*.parquet"))
    assert now["location"] == f"file:{(lake / 'events').resolve()}"
    assert (now["format"], now["partitionColumns"], now["clusteringColumns"]) == (
        "delta",
        ["event_date"],
        [],
    )
    assert (now["numFiles"], now["sizeInBytes"]) == (
        len(files),
        sum(f.stat().st_size for f in files),
    )
    assert (then["numFiles"], then["sizeInBytes"]) == (0, 0)  # created empty
    assert now["id"] == then["id"] and now["createdAt"] == then["createdAt"]
    assert then["lastModified"] < now["lastModified"]
    assert (now["minReaderVersion"], now["minWriterVersion"]) == (1, 2)
    assert now["tableFeatures"] == ["appendOnly", "invariants"]


def test_format_number_with_a_pattern_is_refused(lake):
    with pytest.raises(UserError, match=r"takes a number of places written in the query only"):
        run_duckdb("SELECT format_number(price, '#,###.#') AS f FROM events", lake)


@pytest.mark.parametrize(
    ("call", "value"),
    [
        # as Spark printed each (compared once)
        ("CAST('2024' AS DATE)", dt.date(2024, 1, 1)),
        ("CAST('2024-6' AS DATE)", dt.date(2024, 6, 1)),
        ("CAST(' 2024-06-01T10:00:00 ' AS DATE)", dt.date(2024, 6, 1)),
        ("to_date('2024-06-01 anything')", dt.date(2024, 6, 1)),
        ("try_cast('2024/06/01' AS DATE)", None),
        ("try_to_date('2024 06 01')", None),
        ("CAST('2024-06' AS TIMESTAMP)", dt.datetime(2024, 6, 1, tzinfo=dt.UTC)),
        ("try_cast('2024/06/01 10:00:00' AS TIMESTAMP)", None),
    ],
)
def test_text_is_read_as_a_date_in_spark_forms_only(lake, call, value):
    assert rows(f"SELECT {call} AS x", lake) == [(value,)]


@pytest.mark.parametrize(
    ("sql", "error"),
    [
        # DuckDB read these as 2024-06-01
        ("SELECT CAST('2024/06/01' AS DATE) AS x", "the value '2024/06/01' cannot be cast to DATE"),
        ("SELECT to_date('2024 06 01') AS x", "the value '2024 06 01' cannot be cast to DATE"),
        ("SELECT CAST('20240601' AS DATE) AS x", "the value '20240601' cannot be cast to DATE"),
        (
            "SELECT CAST('2024/06/01 10:00:00' AS TIMESTAMP) AS x",
            "the value '2024/06/01 10:00:00' cannot be cast to TIMESTAMP",
        ),
        # sqlglot wrote a cast for the pattern 'yyyy-MM-dd', which read the text after the day
        (
            "SELECT to_date('2024-06-01 10:00', 'yyyy-MM-dd') AS x",
            'Could not parse string "2024-06-01 10:00"',
        ),
    ],
)
def test_text_spark_cannot_read_as_a_date_stops(lake, sql, error):
    with pytest.raises(UserError, match=re.escape(error)):
        run_duckdb(sql, lake)


def test_whole_numbers_and_decimals_have_spark_types(lake):
    # DuckDB's ceil and floor are DOUBLEs (9.0 printed where Spark prints 9), and sqlglot took
    # 0.125 for a DOUBLE where Spark reads a DECIMAL
    sql = (
        "SELECT floor(price) AS a, ceil(1.2D) AS b, floor(quantity) AS c, round(0.125, 2) AS d, "
        "bround(0.125, 2) AS e FROM events WHERE price = 9.99 LIMIT 1"
    )
    types = run_duckdb(sql, lake).schema.types  # Spark's: three int64, two decimal128(3, 2)
    assert [str(t) for t in types[:3]] == ["int64"] * 3
    assert all(pa.types.is_decimal(t) and t.scale == 2 for t in types[3:])
    assert rows(sql, lake) == [(9, 2, 1, Decimal("0.13"), Decimal("0.12"))]


def test_a_clustered_table_from_elsewhere_shows_its_clustering(tmp_path):
    # The commit Spark writes for `CREATE TABLE ... (a INT, b STRING) USING DELTA CLUSTER BY
    # (a)`: the columns are a domain of the log, which delta-rs does not read.
    fields = [
        {"name": n, "type": t, "nullable": True, "metadata": {}}
        for n, t in (("a", "integer"), ("b", "string"))
    ]
    schema = {"type": "struct", "fields": fields}
    actions = [
        {"commitInfo": {"timestamp": 1795751783380, "operation": "CREATE TABLE"}},
        {
            "metaData": {
                "id": "02879bdf-22be-46f3-be13-e1d6fea0dfc3",
                "format": {"provider": "parquet", "options": {}},
                "schemaString": json.dumps(schema),
                "partitionColumns": [],
                "configuration": {},
                "createdTime": 1795751783191,
            }
        },
        {
            "protocol": {
                "minReaderVersion": 1,
                "minWriterVersion": 7,
                "writerFeatures": ["domainMetadata", "clustering", "invariants", "appendOnly"],
            }
        },
        {
            "domainMetadata": {
                "domain": "delta.clustering",
                "configuration": json.dumps({"clusteringColumns": [["a"]]}),
                "removed": False,
            }
        },
    ]
    log = tmp_path / "lake" / "clu" / "_delta_log"
    log.mkdir(parents=True)
    (log / f"{0:020d}.json").write_text("\n".join(map(json.dumps, actions)) + "\n")
    detail = catalog_answer("DESCRIBE DETAIL clu", tmp_path / "lake")
    shown = catalog_answer("SHOW TBLPROPERTIES clu", tmp_path / "lake")
    assert detail is not None and shown is not None
    row = detail.to_pylist()[0]
    assert (row["clusteringColumns"], row["numFiles"], row["minWriterVersion"]) == (["a"], 0, 7)
    assert row["tableFeatures"] == ["appendOnly", "clustering", "domainMetadata", "invariants"]
    # as Spark printed them for that table
    assert [tuple(r.values()) for r in shown.to_pylist()] == [
        ("clusteringColumns", '[["a"]]'),
        ("delta.feature.appendOnly", "supported"),
        ("delta.feature.clustering", "supported"),
        ("delta.feature.domainMetadata", "supported"),
        ("delta.feature.invariants", "supported"),
        ("delta.minReaderVersion", "1"),
        ("delta.minWriterVersion", "7"),
    ]
