from pathlib import Path

import pytest
import sqlglot
from sqlglot import exp

from engine.definitions.sql import (
    SparkStreaming,
    SqlError,
    SqlStep,
    Watermark,
    load_step,
    load_steps,
    order_steps,
)


def write_view(folder: Path, name: str, query: str) -> Path:
    path = folder / f"{name}.sql"
    path.write_text(f"CREATE OR REPLACE TEMP VIEW {name} AS\n{query}\n")
    return path


def step(folder: Path, name: str, query: str) -> SqlStep:
    return load_step(write_view(folder, name, query))


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        (
            "SELECT * FROM src WATERMARK ts DELAY OF INTERVAL 10 SECONDS",
            "SELECT * FROM src WATERMARK ts DELAY OF INTERVAL '10' SECONDS",
        ),
        (
            "SELECT * FROM db.src WATERMARK ts DELAY OF INTERVAL '1' MINUTE AS s",
            "SELECT * FROM db.src WATERMARK ts DELAY OF INTERVAL '1' MINUTE AS s",
        ),
        (
            "SELECT s.a FROM src WATERMARK s.ts DELAY OF INTERVAL 1 MINUTE s",
            "SELECT s.a FROM src WATERMARK s.ts DELAY OF INTERVAL '1' MINUTE AS s",
        ),
        (
            "SELECT * FROM src WATERMARK CAST(t AS TIMESTAMP) AS ts DELAY OF INTERVAL 1 HOUR",
            "SELECT * FROM src WATERMARK CAST(t AS TIMESTAMP) AS ts DELAY OF INTERVAL '1' HOUR",
        ),
        (
            "SELECT * FROM (SELECT a, ts FROM src) WATERMARK ts DELAY OF INTERVAL 5 SECONDS"
            " q(a, b)",
            "SELECT * FROM (SELECT a, ts FROM src) WATERMARK ts DELAY OF INTERVAL '5' SECONDS"
            " AS q(a, b)",
        ),
        (
            "SELECT a, COUNT(*) FROM src WATERMARK ts DELAY OF INTERVAL 1 MINUTE"
            " WHERE a > 0 GROUP BY a HAVING COUNT(*) > 1",
            "SELECT a, COUNT(*) FROM src WATERMARK ts DELAY OF INTERVAL '1' MINUTE"
            " WHERE a > 0 GROUP BY a HAVING COUNT(*) > 1",
        ),
        (
            "WITH w AS (SELECT * FROM src WATERMARK ts DELAY OF INTERVAL 1 MINUTE) SELECT * FROM w",
            "WITH w AS (SELECT * FROM src WATERMARK ts DELAY OF INTERVAL '1' MINUTE)"
            " SELECT * FROM w",
        ),
        (
            "SELECT * FROM a WATERMARK ts DELAY OF INTERVAL 1 MINUTE AS x"
            " JOIN b WATERMARK ts DELAY OF INTERVAL 2 MINUTES AS y ON x.k = y.k",
            "SELECT * FROM a WATERMARK ts DELAY OF INTERVAL '1' MINUTE AS x"
            " JOIN b WATERMARK ts DELAY OF INTERVAL '2' MINUTES AS y ON x.k = y.k",
        ),
        # WATERMARK is not reserved, so it can still be an alias or a CTE name.
        ("SELECT * FROM src watermark", "SELECT * FROM src AS watermark"),
        (
            "WITH watermark AS (SELECT 1 AS a) SELECT * FROM watermark",
            "WITH watermark AS (SELECT 1 AS a) SELECT * FROM watermark",
        ),
    ],
)
def test_watermark_round_trip(sql: str, expected: str) -> None:
    tree = sqlglot.parse_one(sql, read=SparkStreaming)
    generated = tree.sql(dialect=SparkStreaming)
    assert generated == expected
    assert sqlglot.parse_one(generated, read=SparkStreaming) == tree


def test_watermark_tree() -> None:
    tree = sqlglot.parse_one(
        "SELECT * FROM src WATERMARK ts + INTERVAL 1 SECOND AS t DELAY OF INTERVAL 1 MINUTE AS s",
        read=SparkStreaming,
    )
    watermark = tree.args["from_"].this
    assert isinstance(watermark, Watermark)
    assert watermark.this == exp.to_table("src")
    assert isinstance(watermark.expression, exp.Alias)
    assert watermark.expression.alias == "t"
    assert isinstance(watermark.args["delay"], exp.Interval)
    assert watermark.alias == "s"


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("SELECT * FROM src AS s WATERMARK ts DELAY OF INTERVAL 1 MINUTE", "before the alias"),
        ("SELECT * FROM src WATERMARK ts DELAY INTERVAL 1 MINUTE", "Expecting DELAY OF"),
        ("SELECT * FROM src WATERMARK ts DELAY OF 60", "one-unit INTERVAL"),
        ("SELECT * FROM src WATERMARK ts DELAY OF INTERVAL 1 MINUTE 30 SECONDS", "one-unit"),
    ],
)
def test_watermark_syntax_errors(sql: str, message: str) -> None:
    with pytest.raises(sqlglot.ParseError, match=message):
        sqlglot.parse_one(sql, read=SparkStreaming)


@pytest.mark.parametrize(
    ("query", "references"),
    [
        ("SELECT 1 AS a", set()),
        ("SELECT * FROM Src WATERMARK ts DELAY OF INTERVAL 1 MINUTE", {"src"}),
        ("SELECT * FROM a JOIN b ON a.k = b.k LEFT JOIN c USING (k)", {"a", "b", "c"}),
        ("SELECT * FROM cat.db.t", {"cat.db.t"}),
        ("WITH x AS (SELECT * FROM a), y AS (SELECT * FROM x) SELECT * FROM y", {"a"}),
        ("SELECT * FROM (SELECT * FROM a) WATERMARK ts DELAY OF INTERVAL 1 MINUTE", {"a"}),
        ("SELECT * FROM a WHERE k IN (SELECT k FROM b)", {"a", "b"}),
        ("SELECT * FROM a UNION ALL SELECT * FROM b", {"a", "b"}),
        ("SELECT * FROM range(10)", set()),
    ],
)
def test_references(tmp_path: Path, query: str, references: set[str]) -> None:
    assert step(tmp_path, "v", query).references == references


def test_step_fields(tmp_path: Path) -> None:
    path = tmp_path / "log_lines.sql"
    path.write_text(
        "-- Usable log lines; exact duplicates within the watermark are dropped.\n"
        "CREATE OR REPLACE TEMP VIEW log_lines AS\n"
        "SELECT DISTINCT customer_id, event_time\n"
        "FROM parsed_logs WATERMARK event_time DELAY OF INTERVAL 1 MINUTE\n"
        "WHERE reject_reason IS NULL\n"
    )
    loaded = load_step(path)
    assert (loaded.name, loaded.path, loaded.sql) == ("log_lines", path, path.read_text())
    assert isinstance(loaded.tree, exp.Create)
    assert loaded.references == {"parsed_logs"}
    assert loaded.watermarks == (("event_time", "INTERVAL '1' MINUTE"),)
    assert loaded.distinct


@pytest.mark.parametrize(
    ("query", "watermarks"),
    [
        ("SELECT * FROM a", ()),
        (
            "SELECT * FROM a WATERMARK t AS ts DELAY OF INTERVAL 30 SECONDS"
            " JOIN b WATERMARK b.ts DELAY OF INTERVAL 2 MINUTES ON a.k = b.k",
            (("ts", "INTERVAL '30' SECONDS"), ("ts", "INTERVAL '2' MINUTES")),
        ),
    ],
)
def test_watermarks(tmp_path: Path, query: str, watermarks: tuple[tuple[str, str], ...]) -> None:
    assert step(tmp_path, "v", query).watermarks == watermarks


@pytest.mark.parametrize(
    ("query", "distinct", "columns"),
    [
        ("SELECT DISTINCT a, b AS c, t.d FROM t", True, ["a", "c", "d"]),
        ("SELECT a FROM t", False, ["a"]),
        ("SELECT a FROM (SELECT DISTINCT a FROM t)", False, ["a"]),
        ("SELECT a FROM t UNION SELECT a FROM u", False, ["a"]),
        ("WITH x AS (SELECT a FROM t) SELECT DISTINCT a FROM x", True, ["a"]),
        # GROUP BY with any_value()/first() only: one row per key, deduplication by the keys.
        ("SELECT U AS u, ts, any_value(g) AS g FROM t GROUP BY U, ts", True, ["u", "ts"]),
        ("SELECT first(g) AS g, k FROM t GROUP BY k", True, ["k"]),
        # Real aggregations, HAVING or an unselected key stay aggregations.
        ("SELECT k, count(*) AS n FROM t GROUP BY k", False, ["k", "n"]),
        ("SELECT k, any_value(g) AS g FROM t GROUP BY k HAVING k > 1", False, ["k", "g"]),
        ("SELECT any_value(g) AS g FROM t GROUP BY k", False, ["g"]),
    ],
)
def test_distinct(tmp_path: Path, query: str, distinct: bool, columns: list[str]) -> None:
    loaded = step(tmp_path, "v", query)
    assert loaded.distinct is distinct
    assert loaded.distinct_columns() == columns


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("SELECT DISTINCT * FROM t", "{path}:2:17: output column '*' has no name"),
        ("SELECT DISTINCT a,\n  a + 1 FROM t", "{path}:3:3: output column 'a + 1' has no name"),
    ],
)
def test_distinct_columns_need_names(tmp_path: Path, query: str, expected: str) -> None:
    loaded = step(tmp_path, "v", query)
    with pytest.raises(SqlError) as raised:
        loaded.distinct_columns()
    assert str(raised.value) == expected.format(path=loaded.path)


QUERY = "SELECT DISTINCT a, ts FROM src WATERMARK ts DELAY OF INTERVAL 1 MINUTE WHERE a > 0"


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        (
            {},
            "SELECT DISTINCT a, ts FROM src WATERMARK ts DELAY OF INTERVAL '1' MINUTE WHERE a > 0",
        ),
        (
            {"drop_distinct": True},
            "SELECT a, ts FROM src WATERMARK ts DELAY OF INTERVAL '1' MINUTE WHERE a > 0",
        ),
        (
            {"watermark_delay": "2 minutes"},
            "SELECT DISTINCT a, ts FROM src WATERMARK ts DELAY OF INTERVAL '2' MINUTE WHERE a > 0",
        ),
        (
            {"watermark_delay": " 1 minute "},
            "SELECT DISTINCT a, ts FROM src WATERMARK ts DELAY OF INTERVAL '1' MINUTE WHERE a > 0",
        ),
        (
            {"drop_distinct": True, "watermark_delay": "30 seconds"},
            "SELECT a, ts FROM src WATERMARK ts DELAY OF INTERVAL '30' SECOND WHERE a > 0",
        ),
        (
            {"watermark_delay": "INTERVAL 2 MINUTES"},
            "SELECT DISTINCT a, ts FROM src WATERMARK ts DELAY OF INTERVAL '2' MINUTE WHERE a > 0",
        ),
    ],
)
def test_query_sql(tmp_path: Path, kwargs: dict[str, object], expected: str) -> None:
    loaded = step(tmp_path, "v", QUERY)
    before = loaded.tree.copy()
    assert loaded.query_sql(**kwargs) == expected
    assert loaded.tree == before


def test_window_function_first_in_group_by(tmp_path: Path) -> None:
    # sqlglot alone stops GROUP BY at a WINDOW token (the named-window clause).
    loaded = step(tmp_path, "v", "SELECT s FROM t GROUP BY window(ts, '5 seconds'), s")
    assert loaded.query_sql() == "SELECT s FROM t GROUP BY WINDOW(ts, '5 seconds'), s"


def test_any_value_grouping_runs_as_deduplication(tmp_path: Path) -> None:
    loaded = step(
        tmp_path,
        "v",
        "SELECT U AS u, ts, any_value(g) AS g FROM src WATERMARK ts DELAY OF INTERVAL 5 SECONDS"
        " GROUP BY U, ts",
    )
    assert loaded.query_sql(drop_distinct=True) == (
        "SELECT U AS u, ts, g AS g FROM src WATERMARK ts DELAY OF INTERVAL '5' SECONDS"
    )


def test_any_value_columns_need_names(tmp_path: Path) -> None:
    with pytest.raises(SqlError, match="name the column 'ANY_VALUE\\(g\\)'"):
        step(tmp_path, "v", "SELECT k, any_value(g) FROM t GROUP BY k")


def test_query_sql_replaces_every_watermark(tmp_path: Path) -> None:
    loaded = step(
        tmp_path,
        "v",
        "SELECT * FROM a WATERMARK ts DELAY OF INTERVAL 1 MINUTE AS x"
        " JOIN (SELECT * FROM b WATERMARK ts DELAY OF INTERVAL 5 MINUTES) AS y ON x.k = y.k",
    )
    assert loaded.query_sql(watermark_delay="10 seconds").count("INTERVAL '10' SECOND") == 2


@pytest.mark.parametrize(
    "delay", ["", "2", "minutes", "2 fortnights", "-1 minute", "1.5 fortnights"]
)
def test_query_sql_bad_delay(tmp_path: Path, delay: str) -> None:
    loaded = step(tmp_path, "v", QUERY)
    with pytest.raises(SqlError) as raised:
        loaded.query_sql(watermark_delay=delay)
    assert raised.value.path == loaded.path
    assert f"watermark delay {delay!r}" in str(raised.value)


NOT_A_VIEW = "expected exactly one CREATE [OR REPLACE] TEMP VIEW <name> AS <query> statement"


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        # Columns are where sqlglot puts them: on the last character of the offending token.
        ("v", "CREATE TEMP VIEW v AS\nSELECT (a\nFROM t", "{path}:3:4: Expecting )"),
        (
            "v",
            "CREATE TEMP VIEW v AS\nSELECT a FROM t\n  WHERE b = = 1",
            "{path}:3:13: = is missing what comes after it",
        ),
        ("v", "CREATE TEMP VIEW v AS SELECT 'a FROM t", "{path}: Error tokenizing"),
        ("v", "", f"{{path}}: {NOT_A_VIEW}"),
        ("v", "SELECT 1", f"{{path}}: {NOT_A_VIEW}"),
        ("v", "CREATE VIEW v AS SELECT 1", f"{{path}}: {NOT_A_VIEW}"),
        ("v", "CREATE GLOBAL TEMP VIEW v AS SELECT 1", f"{{path}}: {NOT_A_VIEW}"),
        ("v", "CREATE TEMP TABLE v AS SELECT 1", f"{{path}}: {NOT_A_VIEW}"),
        ("v", "CREATE TEMP VIEW v AS SELECT 1; SELECT 2", f"{{path}}: {NOT_A_VIEW}"),
        ("v", "CREATE TEMP VIEW db.v AS SELECT 1", f"{{path}}: {NOT_A_VIEW}"),
        (
            "bar",
            "CREATE OR REPLACE TEMPORARY VIEW\n  foo AS SELECT 1",
            "{path}:2:5: view 'foo' must be named after its file 'bar'",
        ),
    ],
)
def test_load_step_errors(tmp_path: Path, name: str, text: str, expected: str) -> None:
    path = tmp_path / f"{name}.sql"
    path.write_text(text)
    with pytest.raises(SqlError) as raised:
        load_step(path)
    assert str(raised.value).startswith(expected.format(path=path))


@pytest.mark.parametrize(
    "text",
    [
        "CREATE OR REPLACE TEMP VIEW v AS SELECT 1 AS a;",
        "CREATE TEMPORARY VIEW V AS SELECT 1 AS a",
        "-- about v\ncreate or replace temp view v as\nselect 1 as a\n",
    ],
)
def test_load_step_accepts(tmp_path: Path, text: str) -> None:
    path = tmp_path / "v.sql"
    path.write_text(text)
    assert load_step(path).name == "v"


def test_load_steps(tmp_path: Path) -> None:
    for name in ["b", "a", "c"]:
        write_view(tmp_path, name, "SELECT 1 AS x")
    (tmp_path / "notes.txt").write_text("not SQL")
    assert [loaded.name for loaded in load_steps(tmp_path)] == ["a", "b", "c"]


def test_load_steps_empty_folder(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("not SQL")
    with pytest.raises(SqlError) as raised:
        load_steps(tmp_path)
    assert str(raised.value) == f"{tmp_path}: no .sql files"


@pytest.mark.parametrize(
    ("views", "provided", "extra", "order"),
    [
        ({}, (), {}, []),
        ({"a": "SELECT 1 AS x"}, (), {}, ["a"]),
        # Independent nodes come out alphabetically, each as soon as it is ready.
        (
            {"z": "SELECT 1 AS x", "b": "SELECT * FROM a", "a": "SELECT * FROM src"},
            ["src"],
            {},
            ["a", "b", "z"],
        ),
        (
            {"c": "SELECT * FROM b JOIN a ON a.k = b.k", "b": "SELECT * FROM a", "a": "SELECT 1"},
            (),
            {},
            ["a", "b", "c"],
        ),
        # Extra nodes (e.g. Python state handlers) sit between SQL steps.
        (
            {"lines": "SELECT * FROM Raw", "report": "SELECT * FROM sessions"},
            ["RAW"],
            {"sessions": ["lines"]},
            ["lines", "sessions", "report"],
        ),
        (
            {"v": "WITH c AS (SELECT * FROM src) SELECT * FROM c"},
            ["src"],
            {},
            ["v"],
        ),
    ],
)
def test_order_steps(
    tmp_path: Path,
    views: dict[str, str],
    provided: list[str],
    extra: dict[str, list[str]],
    order: list[str],
) -> None:
    steps = [step(tmp_path, name, query) for name, query in views.items()]
    assert order_steps(steps, provided, extra) == order


@pytest.mark.parametrize(
    ("views", "extra", "expected"),
    [
        (
            {"a": "SELECT *\nFROM src JOIN nope ON src.k = nope.k"},
            {},
            "{a}:3:18: unknown view 'nope'",
        ),
        ({"a": "SELECT * FROM src"}, {"h": ["a", "ghost"]}, "node 'h' reads unknown view 'ghost'"),
        ({"a": "SELECT * FROM a"}, {}, "{a}: cycle: a -> a"),
        # Arrows point from a view to the node that reads it.
        (
            {"b": "SELECT * FROM c", "c": "SELECT * FROM a", "a": "SELECT * FROM b"},
            {},
            "{a}: cycle: a -> c -> b -> a",
        ),
        ({"b": "SELECT * FROM h"}, {"h": ["b"]}, "{b}: cycle: b -> h -> b"),
        ({"a": "SELECT * FROM src"}, {"A": ["src"]}, "node 'A' has the same name as another node"),
    ],
)
def test_order_steps_errors(
    tmp_path: Path, views: dict[str, str], extra: dict[str, list[str]], expected: str
) -> None:
    steps = [step(tmp_path, name, query) for name, query in views.items()]
    with pytest.raises(SqlError) as raised:
        order_steps(steps, ["src"], extra)
    assert str(raised.value) == expected.format(**{s.name: s.path for s in steps})


def test_order_steps_duplicate_view(tmp_path: Path) -> None:
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    first = step(tmp_path / "one", "v", "SELECT 1 AS a")
    second = step(tmp_path / "two", "v", "SELECT 2 AS a")
    with pytest.raises(SqlError) as raised:
        order_steps([first, second])
    assert str(raised.value) == f"{second.path}: view 'v' is also defined in {first.path}"


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (SqlError("boom"), "boom"),
        (SqlError("boom", path=Path("sql/x/a.sql")), "sql/x/a.sql: boom"),
        (SqlError("boom", path=Path("a.sql"), line=3), "a.sql:3: boom"),
        (SqlError("boom", path=Path("a.sql"), line=3, col=7), "a.sql:3:7: boom"),
    ],
)
def test_sql_error_str(error: SqlError, expected: str) -> None:
    assert str(error) == expected
    assert error.message == "boom"
