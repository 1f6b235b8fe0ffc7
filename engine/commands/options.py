"""What the commands share: exit codes, argument types, the options several commands take, and
the lookups behind them (the pipeline registry, the lake's Spark log, a folder to write in)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NoReturn

from engine.definitions.pipeline import Registry
from engine.errors import UserError, did_you_mean

__all__ = [
    "EXIT_FAILED",
    "EXIT_PIPE",
    "EXIT_USAGE",
    "PORT",
    "Parser",
    "a_path",
    "add_conf",
    "add_format",
    "add_lake",
    "at_least",
    "lake_folder",
    "lake_log_file",
    "registry",
    "split_conf",
    "writable_folder",
]

EXIT_USAGE = 2
EXIT_FAILED = 1
EXIT_PIPE = 141  # 128 + SIGPIPE


class Parser(argparse.ArgumentParser):
    """argparse, its usage errors raised as UserError: one line and exit 2, like any other."""

    def error(self, message: str) -> NoReturn:
        raise UserError(f"{message} (see {self.prog} --help)")

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        """argparse's, but an argument this parser does not know is refused here: in a
        command's own parser that names the command and the option meant (`--full_refresh`)."""
        parsed, extra = super().parse_known_args(args, namespace)
        if extra:
            option = extra[0] if extra[0].startswith("-") else ""
            near = did_you_mean(option, self._option_string_actions) if option else ""
            self.error(f"unrecognized arguments: {' '.join(extra)}{near}")
        return parsed, extra


def a_path(text: str) -> str:
    """An argparse type for a path: a leading `~` is the home folder, as the shell reads it
    in `--lake ~/x` but not in `--lake=~/x` (which would make a folder named `~`)."""
    return os.path.expanduser(text)


def at_least(low: int, *, most: int | None = None) -> Callable[[str], int]:
    """An argparse type: a whole number of at least `low` (and at most `most`)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be at least {low}, got {value}")
        if most is not None and value > most:
            raise argparse.ArgumentTypeError(f"must be at most {most}, got {value}")
        return value

    return parse


PORT = at_least(1, most=65535)


def add_lake(parser: argparse.ArgumentParser) -> None:
    """The `--lake` option: the folder of the Delta tables."""
    parser.add_argument(
        "--lake", type=a_path, default="lake", help="folder of the Delta tables (default ./lake)"
    )


def add_conf(parser: argparse.ArgumentParser, help: str) -> None:
    """The `--conf KEY=VALUE` option, given any number of times."""
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help=help)


def split_conf(pairs: Sequence[str]) -> tuple[dict[str, str], dict[str, str]]:
    """`--conf` pairs: the Spark settings (spark.*) and the others; one without `=` is a user
    error."""
    spark_conf: dict[str, str] = {}
    others: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UserError(f"--conf {pair}: expected KEY=VALUE")
        (spark_conf if key.startswith("spark.") else others)[key] = value
    return spark_conf, others


def add_format(parser: argparse.ArgumentParser, *, text: bool = False) -> None:
    """The `--format` option of commands that print rows (`text`: lines for people first)."""
    choices = ["text", "table", "json", "csv"] if text else ["table", "json", "csv"]
    parser.add_argument(
        "--format",
        choices=choices,
        default=choices[0],
        help=f"how rows are printed (default {choices[0]}; json: one array of row objects)",
    )


def registry(args: argparse.Namespace, *, may_be_new: bool = False) -> Registry:
    """The pipelines of `--pipelines`, else the project's own; a folder that is not there is
    a UserError unless `may_be_new` (`init` makes it)."""
    if not args.pipelines:
        return Registry()
    folder = Path(args.pipelines)
    if not may_be_new and not folder.is_dir():
        raise UserError(f"--pipelines {args.pipelines}: no such folder")
    return Registry(folder)


def lake_folder(args: argparse.Namespace) -> Path:
    """`--lake`, absolute; a Delta table or a folder inside one is a user error (the lake is the
    folder that holds the tables)."""
    lake = Path(args.lake).resolve()
    table = _table_holding("--lake", lake)
    if table is None:
        return lake
    where = "is a Delta table" if table == lake else f"is inside the Delta table {table}"
    raise UserError(
        f"--lake: {lake} {where}; the lake is the folder that holds the tables ({table.parent})"
    )


def lake_log_file(lake: Path) -> Path:
    """Where Spark's own output goes for a command on `lake` (not stderr, unless --debug)."""
    return lake / "_logs" / "spark.log"


def _table_holding(option: str, path: Path) -> Path | None:
    """The Delta table whose folder `path` is, or is inside; None if there is none. A folder
    on the way that may not be searched is a user error naming `option`."""
    try:
        return next((p for p in (path, *path.parents) if (p / "_delta_log").is_dir()), None)
    except PermissionError:
        raise UserError(f"{option}: permission denied: {path}") from None


def writable_folder(option: str, path: Path) -> Path:
    """`path` (absolute) if it is a folder or can be made one; a file or a folder without
    write permission in the way, or a Delta table's folder, is a user error naming `option`,
    found before anything starts."""
    table = _table_holding(option, path)
    if table is not None:
        raise UserError(
            f"{option}: {path} is inside the Delta table {table}; give a folder outside the "
            "tables (Delta's VACUUM deletes the files in a table's folder that it does not list)"
        )
    existing = next(p for p in (path, *path.parents) if p.exists())
    if not existing.is_dir():
        raise UserError(f"{option}: {existing} is a file, not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise UserError(f"{option}: no permission to write in {existing}")
    return path
