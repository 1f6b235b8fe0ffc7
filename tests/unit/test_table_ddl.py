"""A table's DDL file: what it may say, and one line for each clause the lake would not honour."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from engine.definitions.tables import load_table, view_misfits
from engine.errors import UserError

TAKES = (
    "not supported; a table here has typed columns with NOT NULL and COMMENT, PARTITIONED BY, "
    "and TBLPROPERTIES 'lake.mode', 'lake.key', 'lake.role'"
)


def load(tmp_path: Path, ddl: str):
    path = tmp_path / "t.sql"
    path.write_text(f"-- The table t\n{ddl}\n")
    return load_table(path)


def test_a_table_takes_columns_comments_partitions_and_the_lake_properties(tmp_path):
    table = load(
        tmp_path,
        "CREATE TABLE t (k STRING NOT NULL COMMENT 'key', d DATE, n BIGINT) using delta "
        "PARTITIONED BY (d) TBLPROPERTIES ('lake.mode' = 'merge', 'lake.key' = 'k')",
    )
    assert [(c.name, c.nullable, c.comment) for c in table.columns] == [
        ("k", False, "key"),
        ("d", True, ""),
        ("n", True, ""),
    ]
    assert (table.mode, table.key, table.partition_by, table.description) == (
        "merge",
        ("k",),
        ("d",),
        "The table t",
    )


# Each of these made a different table on Spark's writer than on delta-rs's, or none at all
# on one of them, or (a misspelt property) an append table where a merge was meant.
@pytest.mark.parametrize(
    ("ddl", "clause"),
    [
        ("CREATE TABLE t (a INT, b STRING) USING DELTA CLUSTER BY (a)", "CLUSTER BY (a)"),
        (
            "CREATE TABLE t (a INT, b INT GENERATED ALWAYS AS (a + 1)) USING DELTA",
            "column b: GENERATED ALWAYS AS (a + 1)",
        ),
        ("CREATE TABLE t (a INT DEFAULT 3) USING DELTA", "column a: DEFAULT 3"),
        ("CREATE TABLE t (a INT CHECK (a > 0)) USING DELTA", "column a: CHECK (a > 0)"),
        (
            "CREATE TABLE t (a INT, CONSTRAINT positive CHECK (a > 0)) USING DELTA",
            "CONSTRAINT positive CHECK (a > 0)",
        ),
        ("CREATE TABLE t (a INT) USING DELTA LOCATION '/x'", "LOCATION '/x'"),
        ("CREATE TABLE t (a INT) USING PARQUET", "USING PARQUET"),
        ("CREATE TABLE t (a INT) USING DELTA OPTIONS (x 1)", "OPTIONS ("),
        (
            "CREATE TABLE t (a INT) USING DELTA "
            "TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true')",
            "TBLPROPERTIES 'delta.enableChangeDataFeed'",
        ),
        (
            "CREATE TABLE t (a INT) USING DELTA TBLPROPERTIES ('lake.mod' = 'merge')",
            "TBLPROPERTIES 'lake.mod'",
        ),
        ("CREATE OR REPLACE TABLE t (a INT) USING DELTA", "CREATE OR REPLACE"),
        ("CREATE TABLE t USING DELTA AS SELECT 1 AS a", "AS SELECT"),
    ],
)
def test_a_clause_the_lake_would_not_honour_is_refused(tmp_path, ddl, clause):
    with pytest.raises(UserError, match=re.escape(clause) + ".*" + re.escape(TAKES)) as raised:
        load(tmp_path, ddl)
    assert str(raised.value).startswith(f"{tmp_path / 't.sql'}: ")


@pytest.mark.parametrize(
    ("ddl", "error"),
    [
        (
            "CREATE TABLE t (a INT) USING DELTA COMMENT 'mine'",
            "COMMENT 'mine': not supported; .* \\(its description is the comment above CREATE",
        ),
        ("CREATE TABLE t (a INT)", "the table is a Delta table: write USING DELTA after"),
        # Spark's writer checks these on every row, delta-rs's does not
        (
            "CREATE TABLE t (a VARCHAR(10)) USING DELTA",
            "VARCHAR\\(10\\): a length is not supported;",
        ),
        (
            "CREATE TABLE t (a ARRAY<STRUCT<x: INT NOT NULL>>) USING DELTA",
            "STRUCT field x: NOT NULL: not supported; a STRUCT's fields have a name and a type",
        ),
        ("CREATE TABLE t (a STRUCT<x: INT COMMENT 'c'>) USING DELTA", "STRUCT field x: COMMENT"),
        # Spark refuses these at creation (COLUMN_ALREADY_EXISTS,
        # DELTA_INVALID_CHARACTERS_IN_COLUMN_NAMES); delta-rs took the second
        ("CREATE TABLE t (a INT, A STRING) USING DELTA", "column 'A' is there twice"),
        ("CREATE TABLE t (a STRUCT<x: INT, x: INT>) USING DELTA", "STRUCT field 'x' is there"),
        ("CREATE TABLE t (`a b` INT) USING DELTA", "column 'a b': a name here has no space"),
        ("CREATE TABLE t (a STRUCT<`x=1`: INT>) USING DELTA", "STRUCT field 'x=1': a name here"),
        (
            "CREATE TABLE t (a ARRAY<INT>, b INT) USING DELTA PARTITIONED BY (a)",
            "partition column 'a' is ARRAY<INT>: a partition column has a plain type",
        ),
    ],
)
def test_a_refusal_says_what_to_write_instead(tmp_path, ddl, error):
    with pytest.raises(UserError, match=error):
        load(tmp_path, ddl)


@pytest.mark.parametrize(
    ("given", "read", "problems"),
    [
        (["id", "n"], False, []),
        (["ID", "N"], False, []),  # names in any case, as Spark selects them
        (["id"], False, ["view 'v' lacks column(s) n of table t"]),
        (
            ["id", "n", "extra"],
            False,
            [
                "view 'v' has column(s) extra that table t lacks: declare them in the table "
                "or leave them out of the view"
            ],
        ),
        (["id", "n", "extra"], True, []),  # a step reads it: the column is not lost
    ],
)
def test_a_view_fits_its_table_by_column_names(given, read, problems):
    assert view_misfits("v", "t", ["id", "n"], given, read=read) == problems
