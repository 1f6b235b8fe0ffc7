"""A table's DDL against its Delta schema: what is added, widened or relaxed, what is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.definitions.tables import load_table
from engine.plan.table_changes import delta_type_name, table_changes

DDL = """-- test table
CREATE TABLE t (
  id STRING NOT NULL COMMENT 'key',
  n {n_type},
  x DOUBLE{extra}
) USING DELTA
{partition}TBLPROPERTIES ('lake.mode' = 'append')
"""


def ddl(tmp_path: Path, *, n_type: str = "INT", extra: str = "", partition: str = ""):
    path = tmp_path / "t.sql"
    path.write_text(DDL.format(n_type=n_type, extra=extra, partition=partition))
    return load_table(path)


def field(name: str, dtype: object, nullable: bool = True, comment: str | None = None) -> dict:
    metadata = {"comment": comment} if comment is not None else {}
    return {"name": name, "type": dtype, "nullable": nullable, "metadata": metadata}


# The Delta log's schema of table t as created from DDL with its defaults.
BASE = [field("id", "string", False, "key"), field("n", "integer"), field("x", "double")]


def schema(*fields: dict) -> str:
    return json.dumps({"type": "struct", "fields": list(fields)})


@pytest.mark.parametrize(
    ("delta", "name"),
    [
        ("long", "bigint"),
        ("integer", "int"),
        ("short", "smallint"),
        ("timestamp", "timestamp"),
        ({"type": "array", "elementType": "string", "containsNull": True}, "array<string>"),
        (
            {"type": "map", "keyType": "string", "valueType": "long", "valueContainsNull": True},
            "map<string,bigint>",
        ),
        (
            {"type": "struct", "fields": [field("a", "integer"), field("b", "date")]},
            "struct<a:int,b:date>",
        ),
    ],
)
def test_delta_types_read_as_spark_names(delta: object, name: str):
    assert delta_type_name(delta) == name  # type: ignore[arg-type]


def test_the_same_schema_changes_nothing(tmp_path: Path):
    changes = table_changes(ddl(tmp_path), schema(*BASE), [])
    assert not changes.evolves and changes.refused == ()


def test_a_new_nullable_column_is_added(tmp_path: Path):
    table = ddl(tmp_path, extra=",\n  note STRING COMMENT 'new'")
    changes = table_changes(table, schema(*BASE), [])
    assert [c.name for c in changes.add] == ["note"] and changes.refused == ()
    assert changes.describe() == "add column note STRING"


@pytest.mark.parametrize(
    ("kwargs", "existing", "refusal"),
    [
        ({"extra": ",\n  note STRING NOT NULL"}, BASE, "new column note is NOT NULL"),
        ({}, [*BASE, field("gone", "string")], "column gone is gone (dropped or renamed)"),
        ({"n_type": "STRING"}, BASE, "column n changed type from int to string"),
        ({"n_type": "INT"}, [BASE[0], field("n", "long"), BASE[2]], "from bigint to int"),
        ({"n_type": "INT NOT NULL"}, BASE, "column n became NOT NULL"),
        ({"partition": "PARTITIONED BY (id)\n"}, BASE, "partitioning changed from (none) to (id)"),
    ],
)
def test_changes_delta_cannot_apply_are_refused(
    tmp_path: Path, kwargs: dict, existing: list, refusal: str
):
    table = ddl(tmp_path, **kwargs)
    changes = table_changes(table, schema(*existing), [])
    assert len(changes.refused) == 1
    assert changes.refused[0].startswith(f"{table.path}: ")
    assert refusal in changes.refused[0]


@pytest.mark.parametrize(
    ("n_type", "old", "phrase"),
    [
        ("BIGINT", "integer", "widen n INT -> BIGINT"),
        ("DOUBLE", "integer", "widen n INT -> DOUBLE"),
        ("INT", "short", "widen n SMALLINT -> INT"),
    ],
)
def test_a_type_delta_can_widen_is_widened(tmp_path: Path, n_type: str, old: str, phrase: str):
    changes = table_changes(
        ddl(tmp_path, n_type=n_type), schema(BASE[0], field("n", old), BASE[2]), []
    )
    assert changes.refused == () and changes.describe() == phrase


def test_a_dropped_not_null_is_relaxed(tmp_path: Path):
    existing = [BASE[0], field("n", "integer"), field("x", "double", nullable=False)]
    changes = table_changes(ddl(tmp_path), schema(*existing), [])
    assert changes.relax == ("x",) and changes.describe() == "allow NULL in x"


def test_an_edited_comment_is_set_and_a_dropped_one_left(tmp_path: Path):
    # DESCRIBE showed the comment the table was created with, whatever the DDL said since.
    table = ddl(tmp_path, extra=" COMMENT 'a measure'")
    changes = table_changes(table, schema(field("id", "string", False, "old key"), *BASE[1:]), [])
    assert [c.name for c in changes.recomment] == ["id", "x"]
    assert changes.describe() == "comment on id; comment on x" and not changes.refused
    dropped = table_changes(ddl(tmp_path), schema(*BASE[:2], field("x", "double", True, "a")), [])
    assert not dropped.evolves
