"""A lake whose tables disagree with the checkpoint is refused before any row moves: another
checkpoint (a typo in --checkpoints), a damaged or rolled-back Delta log, a deleted table."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from engine.commands import main
from engine.definitions.pipeline import Registry
from engine.errors import UserError
from engine.lake.guard import check_tables, release_table
from engine.plan import plan_pipeline
from engine.runtime.run import RunOptions, run_pipeline
from tests.pipeline.test_cli import one_error_line, runner

TABLES = ("events", "quarantine", "purchases", "sessions", "carts")


@pytest.fixture(scope="module")
def finished(spark, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A lake after one real run of server_logs over the bundled sample."""
    lake = tmp_path_factory.mktemp("guard") / "lake"
    plan = plan_pipeline(Registry().get("server_logs"), once=True)
    run_pipeline(spark, plan, RunOptions(lake=lake, once=True, quiet=True))
    return lake


@pytest.fixture
def lake(finished: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "lake"
    shutil.copytree(finished, copy)
    return copy


def check(lake: Path, checkpoint: Path | None = None, **options: bool) -> None:
    check_tables(
        pipeline="server_logs",
        query="main",
        checkpoint=checkpoint or lake / "_checkpoints" / "server_logs" / "main",
        tables={t: lake / t for t in TABLES},
        **options,
    )


def newest_commit(table: Path) -> Path:
    return max((table / "_delta_log").glob("*.json"))


def test_a_checkpoint_typo_is_refused_and_writes_nothing(finished: Path):
    events = newest_commit(finished / "events")
    rerun = runner(
        "run", "server_logs", "--once", "--lake", str(finished),
        "--checkpoints", str(finished / "_checkpoint"),
    )  # fmt: skip
    assert rerun.returncode == 2
    line = one_error_line(rerun)
    assert "table events: server_logs/main writes it from checkpoint" in line
    assert str(finished / "_checkpoints" / "server_logs" / "main") in line
    assert "--new-checkpoint" in line
    assert newest_commit(finished / "events") == events
    assert not (finished / "_checkpoint").exists()
    # Asked for explicitly, another checkpoint may write the tables.
    check(finished, finished / "_checkpoint" / "server_logs" / "main", new_checkpoint=True)


def test_a_deleted_checkpoint_is_named_as_such(lake: Path):
    """The same folder made anew: "writes it from checkpoint X, not X" told the user nothing."""
    checkpoint = lake / "_checkpoints" / "server_logs" / "main"
    for table in TABLES:  # as if the run had written this copy of the lake
        owner = lake / table / "_writers" / "server_logs.main.json"
        owner.write_text(
            json.dumps({**json.loads(owner.read_text()), "checkpoint": str(checkpoint)})
        )
    shutil.rmtree(checkpoint)
    with pytest.raises(UserError) as refused:
        check(lake)
    assert str(refused.value).startswith(
        f"table events: server_logs/main wrote it from checkpoint {checkpoint}, which has been "
        "deleted or replaced since: restore that folder, or run with --new-checkpoint"
    )
    check(lake, new_checkpoint=True)


def test_a_table_that_moved_from_another_query_is_refused(lake: Path):
    """A lake from before the queries were derived: sessions was written by query sessions.
    main has committed batches without it, so its rows follow another checkpoint."""
    writers = lake / "sessions" / "_writers"
    (writers / "server_logs.main.json").rename(writers / "server_logs.sessions.json")
    with pytest.raises(UserError) as refused:
        check(lake)
    assert str(refused.value).startswith(
        "table sessions: written by server_logs/sessions until now, and server_logs/main has "
        "committed batches without it"
    )
    assert str(refused.value).endswith("run with --full-refresh to rebuild it")
    # A rebuild empties the pipeline's rows and forgets all its claims, whatever the query.
    release_table(lake / "sessions", pipeline="server_logs")
    assert list(writers.iterdir()) == []


def test_an_intact_lake_passes(lake: Path):
    check(lake)
    written = json.loads((lake / "_checkpoints/server_logs/main/lake_batches.json").read_text())
    # The last batch that wrote rows to each table: the sample's last session times out in
    # batch 1, the batch that only moves the watermark on.
    assert written == {"events": 0, "quarantine": 0, "purchases": 0, "carts": 0, "sessions": 1}


def truncate_half(table: Path) -> None:
    commit = newest_commit(table)
    commit.write_bytes(commit.read_bytes()[: commit.stat().st_size // 2])


def drop_newest(table: Path) -> None:
    newest_commit(table).unlink()


def drop_newest_and_checksum(table: Path) -> None:
    commit = newest_commit(table)
    commit.with_suffix(".crc").unlink(missing_ok=True)
    commit.unlink()


def keep_first_line(table: Path) -> None:
    commit = newest_commit(table)
    commit.write_text(commit.read_text().splitlines(keepends=True)[0])


def delete_table(table: Path) -> None:
    shutil.rmtree(table)


@pytest.mark.parametrize(
    ("table", "damage", "message"),
    [
        ("events", truncate_half, "table events: Delta log is damaged: "),
        ("sessions", drop_newest, "table sessions: Delta log is missing commit 2 (its checksum"),
        (
            "sessions",
            drop_newest_and_checksum,
            "table sessions: batch 1 of server_logs/main is committed",
        ),
        ("events", keep_first_line, "table events: Delta log is damaged: version 1 has 0 data"),
        ("carts", delete_table, "table carts: missing from the lake"),
    ],
)
def test_a_damaged_table_is_refused_with_its_name(
    lake: Path, table: str, damage: Callable[[Path], None], message: str
):
    damage(lake / table)
    with pytest.raises(UserError) as refused:
        check(lake)
    assert message in str(refused.value)
    assert "\n" not in str(refused.value)


def test_full_refresh_of_a_damaged_table_is_refused_before_the_checkpoint_moves(lake: Path):
    """Emptying needs a readable log: the rebuild stopped on delta-rs' own error after it had
    set the checkpoint aside."""
    truncate_half(lake / "events")
    args = ["run", "server_logs", "--once", "--lake", str(lake), "--full-refresh", "events"]
    refused = runner(*args)
    assert refused.returncode == 2
    line = one_error_line(refused)
    assert line.startswith(
        "error: --full-refresh cannot empty events: table events: Delta log is damaged: "
    )
    assert line.endswith(
        "restore the file, or move the table's folder away and rebuild it with --full-refresh"
    )
    checkpoints = lake / "_checkpoints" / "server_logs"
    assert [p.name for p in checkpoints.iterdir()] == ["main"]
    # As the message says: the folder moved away, the rebuild makes the table anew.
    (lake / "events").rename(lake.parent / "events.damaged")
    dry = runner(*args, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "query main: start again from the beginning of the input" in dry.stdout


@pytest.mark.parametrize(
    "command",
    [["query", "SELECT count(*) FROM events"], ["history", "events"], ["quality", "events"]],
)
def test_reading_a_damaged_table_names_it(
    lake: Path, command: list[str], capsys: pytest.CaptureFixture[str]
):
    """Each said delta-rs' own `Kernel error: Json error: ...`, without the table (quality
    with exit 1, as for a failed check)."""
    truncate_half(lake / "events")
    assert main([*command, "--lake", str(lake)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: table events: Delta log is damaged: "), err
    assert len(err.splitlines()) == 1
