"""Usage errors argparse finds (unknown option, bad number) are one line and exit 2; the
options of every command are taken before or after it."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from engine.commands import build_parser, main


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["run", "server_logs", "--bogus"],
            "unrecognized arguments: --bogus (see runner.py run --help)",
        ),
        (
            ["run", "server_logs", "--full_refresh", "events"],
            "unrecognized arguments: --full_refresh events (did you mean --full-refresh?)"
            " (see runner.py run --help)",
        ),
        (["--bogus", "pipelines"], "unrecognized arguments: --bogus (see runner.py --help)"),
        (["run"], "the following arguments are required: pipeline (see runner.py run --help)"),
        (
            ["generate", "server_logs", "--out", "x", "--events", "0"],
            "--events: must be at least 1",
        ),
        (["generate", "server_logs", "--out", "x", "--events", "1e3"], "not a whole number: '1e3'"),
        (["query", "SELECT 1", "--version", "-1"], "--version: must be at least 0, got -1"),
        (["query", "SELECT 1", "--format", "xml"], "--format: invalid choice: 'xml'"),
        (["broker", "--partitions", "0"], "--partitions: must be at least 1, got 0"),
        (["serve-orders", "--count", "0"], "--count: must be at least 1, got 0"),
    ],
)
def test_usage_errors_are_one_line_and_exit_2(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err
    assert len(err.strip().splitlines()) == 1


def test_help_still_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["generate", "--help"])
    assert exit_.value.code == 0
    assert "--events" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["--help"])
    top = capsys.readouterr().out
    assert "streaming pipelines written in Spark SQL" in top and "exit 2" not in top


@pytest.mark.parametrize(
    "args",
    [
        ["--pipelines", "{folder}", "pipelines"],
        ["pipelines", "--pipelines", "{folder}"],
        ["--pipelines", "elsewhere", "pipelines", "--pipelines", "{folder}"],  # the last wins
    ],
)
def test_pipelines_folder_before_or_after_the_command(
    args: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from engine.project import Project
    from engine.scaffold import init_pipeline

    folder = tmp_path / "mine"
    init_pipeline("shop", Project(folder))
    assert main([a.format(folder=folder / "pipelines") for a in args]) == 0
    listed = capsys.readouterr().out
    assert listed.startswith("shop") and "server_logs" not in listed


def test_a_leading_tilde_is_the_home_folder_after_an_equals_sign_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The shell leaves `--pipelines=~/x` alone: it read a folder named `~` in the current one.
    from engine.project import Project
    from engine.scaffold import init_pipeline

    init_pipeline("shop", Project(tmp_path / "mine"))
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    assert main(["--pipelines=~/mine/pipelines", "pipelines"]) == 0
    assert capsys.readouterr().out.startswith("shop")
    assert main(["query", "SELECT 1", "--lake=~/nowhere"]) == 2
    assert capsys.readouterr().err == f"error: --lake: no lake at {tmp_path / 'nowhere'}\n"
    assert not (tmp_path / "~").exists()


def test_every_path_option_reads_a_leading_tilde() -> None:
    from engine.commands.options import a_path

    paths = {"lake", "input", "checkpoints", "report", "out", "pipelines"}
    plain = [
        f"{name} --{action.dest}"
        for name, command in commands().items()
        for action in command._actions
        if action.dest in paths and action.type is not a_path
    ]
    assert plain == []


@pytest.mark.parametrize("command", [["pipelines"], ["run", "shop", "--once"], ["lint"]])
def test_a_pipelines_folder_that_is_not_there_is_one_line(
    command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # `pipelines` listed nothing and exited 0; `run` said "unknown pipeline (pipelines: none)".
    missing = tmp_path / "typo" / "pipelines"
    assert main(["--pipelines", str(missing), *command]) == 2
    assert capsys.readouterr().err == f"error: --pipelines {missing}: no such folder\n"


def test_an_empty_pipelines_folder_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--pipelines", str(tmp_path), "pipelines"]) == 0
    assert capsys.readouterr().out == (
        f"no pipelines in {tmp_path} (`runner.py init NAME` writes one)\n"
    )


def commands() -> dict[str, argparse.ArgumentParser]:
    """Each command's parser, by name."""
    actions = build_parser()._actions
    return next(a for a in actions if isinstance(a, argparse._SubParsersAction)).choices


def test_every_argument_of_every_command_says_what_it_is_for() -> None:
    silent = [
        f"{name} {action.dest}"
        for name, command in commands().items()
        for action in command._actions
        if not action.help
    ]
    assert silent == []


def test_the_readme_lists_every_command_with_its_options() -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    block = readme.split("## Commands", 1)[1].split("```")[1]
    usage: dict[str, str] = {}
    for line in block.splitlines():
        if line.startswith("python runner.py "):
            name = line.split()[2]
            usage[name] = line
        elif line.strip() and usage:
            usage[name] += line  # a continuation line
    unlisted = [
        f"{name} {option}"
        for name, command in commands().items()
        for action in command._actions
        for option in action.option_strings[-1:]
        if option not in ("--help", "--debug", "--pipelines") and option not in usage.get(name, "")
    ]
    assert sorted(usage) == sorted(commands())
    assert unlisted == []
