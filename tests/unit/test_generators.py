"""What every part-file generator shares (devtools.generators): full files in mtime order, no
overwriting, a progress bar on stderr."""

from __future__ import annotations

import time
from itertools import pairwise
from pathlib import Path

import pytest

from devtools.generators.order_status import generate_order_status
from devtools.generators.sensor_cep import generate_sensor_cep
from devtools.generators.user_activity import generate_user_activity

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
