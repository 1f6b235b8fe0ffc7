"""The version and suite of each table's last validation that passed (`state.json`), where
`--since-last` starts from."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import NamedTuple

from engine.errors import UserError
from engine.quality.suites import Suite

__all__ = ["Passed", "load_state", "save_state", "suite_digest"]


class Passed(NamedTuple):
    """A table's last validation that passed: the version, and the suite it passed."""

    version: int
    suite: str | None  # None: recorded before suites were (the next check is of the whole table)


def suite_digest(suite: Suite) -> str:
    """What a suite checks: its file and the float columns it adds checks for."""
    text = suite.path.read_bytes() + "\n".join(suite.finite).encode()
    return hashlib.sha256(text).hexdigest()[:16]


def load_state(path: Path) -> dict[str, Passed]:
    """The state file's tables (none when there is no file yet)."""
    if not path.is_file():
        return {}
    try:
        return {
            k: Passed(int(v["version"]), v.get("suite"))
            for k, v in json.loads(path.read_text()).items()
        }
    except (ValueError, KeyError, TypeError, AttributeError):
        raise UserError(f"{path}: not a quality state file (delete it to start over)") from None


def save_state(path: Path, state: dict[str, Passed]) -> None:
    """Write the state file, tables sorted."""
    path.write_text(json.dumps({k: v._asdict() for k, v in sorted(state.items())}, indent=2) + "\n")
