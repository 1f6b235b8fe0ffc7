"""What every part-file generator shares (devtools.generators): full files in mtime order, no
overwriting, a progress bar on stderr, a summary, and the registry `runner.py generate` uses."""

from __future__ import annotations

import time
from dataclasses import replace
from itertools import pairwise
from pathlib import Path

import pytest

from devtools.broker import Broker
from devtools.generators import Summary, generate, generators
from devtools.generators.order_status import generate_order_status
from devtools.generators.sensor_cep import generate_sensor_cep
from devtools.generators.user_activity import generate_user_activity
from engine.commands import main
from tests.conftest import consume

GENERATORS = [generate_sensor_cep, generate_user_activity, generate_order_status]


@pytest.mark.parametrize("generate", GENERATORS)
def test_files_are_full_and_modified_in_order(tmp_path: Path, generate) -> None:
    folder = tmp_path / "out"
    summary = generate(folder, events=2300, lines_per_file=500)
    paths = sorted(folder.iterdir())
    assert summary.files == len(paths) == 5
    assert [len(path.read_text().splitlines()) for path in paths] == [500] * 4 + [300]
    # Spark's file source reads files in modification-time order.
    mtimes = [path.stat().st_mtime_ns for path in paths]
    assert all(later - earlier == 1_000_000_000 for earlier, later in pairwise(mtimes))
    assert mtimes[-1] < time.time_ns()


@pytest.mark.parametrize("generate", GENERATORS)
def test_refuses_a_non_empty_folder(tmp_path: Path, generate) -> None:
    (tmp_path / "keep.txt").write_text("x")
    with pytest.raises(FileExistsError):
        generate(tmp_path, events=10)
    empty = tmp_path / "empty"
    empty.mkdir()
    assert generate(empty, events=10).files == 1


@pytest.mark.parametrize("generate", GENERATORS)
def test_progress_bar_goes_to_stderr(tmp_path: Path, capsys, generate) -> None:
    generate(tmp_path / "out", events=300, progress=True)
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "300/300" in captured.err


# --- the registry `runner.py generate` dispatches through ---------------------------------------


@pytest.mark.parametrize("pipeline", sorted(generators()))
def test_each_registered_generator_runs_through_the_cli(tmp_path: Path, capsys, pipeline) -> None:
    out = tmp_path / "out"
    assert main(["generate", pipeline, "--out", str(out), "--events", "50", "--seed", "3"]) == 0
    printed = capsys.readouterr().out.splitlines()
    expected = generators()[pipeline].function(tmp_path / "again", events=50, seed=3)
    assert isinstance(expected, Summary)
    # One line, `name value, ...` in the summary's field order; the same lines as a direct call.
    assert printed == [", ".join(f"{k} {v}" for k, v in expected.as_dict().items())]
    assert printed == [expected.line()]
    assert expected.lines >= 50 and expected.files == 1
    assert sorted(p.read_text() for p in out.iterdir()) == sorted(
        p.read_text() for p in (tmp_path / "again").iterdir()
    )


def test_the_registry_knows_the_seeded_pipelines() -> None:
    known = generators()
    assert sorted(known) == ["order_status", "sensor_cep", "server_logs", "user_activity"]
    assert sorted(name for name, g in known.items() if g.kafka) == ["order_status", "sensor_cep"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["nope", "--out", "x"],
            "error: generate: no generator for pipeline 'nope' "
            "(have: order_status, sensor_cep, server_logs, user_activity)",
        ),
        (
            ["server_logs", "--out", "kafka://127.0.0.1/logs"],
            "error: --out: expected kafka://HOST:PORT/TOPIC, got 'kafka://127.0.0.1/logs'",
        ),
    ],
)
def test_generate_user_errors_are_one_line(capsys, args, message) -> None:
    assert main(["generate", *args]) == 2
    assert capsys.readouterr().err.strip() == message


@pytest.mark.parametrize("pipeline", ["order_status", "sensor_cep", "server_logs", "user_activity"])
def test_generate_into_a_non_empty_folder_is_one_line(tmp_path: Path, capsys, pipeline) -> None:
    (tmp_path / "keep.txt").write_text("x")
    assert main(["generate", pipeline, "--out", str(tmp_path)]) == 2
    # Refused before a progress bar is drawn: the error is all there is.
    assert capsys.readouterr().err.strip() == f"error: --out: {tmp_path} exists and is not empty"


def test_generate_to_a_broker_that_is_not_there_is_one_line(capsys) -> None:
    assert main(["generate", "sensor_cep", "--out", "kafka://127.0.0.1:1/readings"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --out: kafka broker 127.0.0.1:1 unreachable"), err
    assert len(err.splitlines()) == 1, err


def test_part_file_generators_send_the_same_lines_to_kafka(tmp_path: Path) -> None:
    """server_logs and user_activity write part files; `--out kafka://` sends their lines in
    file order, as the bytes written."""
    with Broker().start(["logs", "activity"]) as broker:
        for pipeline, topic in (("server_logs", "logs"), ("user_activity", "activity")):
            folder = tmp_path / pipeline
            expected = generate(pipeline, str(folder), events=2000, seed=2, faults=True)
            out = f"kafka://{broker.servers}/{topic}"
            summary = generate(pipeline, out, events=2000, seed=2, faults=True)
            assert summary == replace(expected, files=0)  # type: ignore[type-var]
            parts = sorted(folder.iterdir())
            lines = [line for part in parts for line in part.read_bytes().splitlines()]
            assert len(lines) == summary.lines
            sent = consume(broker.servers, topic, expect=len(lines))
            assert [m.value() for m in sent] == lines
