"""`-- noqa` comments: the warnings they silence, and those that silence nothing."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from engine.plan.findings import Finding

__all__ = ["silenced", "unused_noqa"]

# `-- noqa` (every warning of the line) or `-- noqa: code, code` at the end of a line; `#` in
# YAML. Errors are not silenced: `run` would stop on them all the same.
_NOQA = re.compile(r"(?:--|#)\s*noqa\b(?::\s*(?P<codes>[\w-]+(?:\s*,\s*[\w-]+)*))?", re.I)


def silenced(finding: Finding) -> bool:
    """Whether the finding is a warning its line says to leave unsaid (`-- noqa: code`)."""
    if finding.severity != "warning" or finding.line is None:
        return False
    try:
        line = finding.path.read_text().splitlines()[finding.line - 1]
    except (OSError, IndexError, UnicodeDecodeError):
        return False
    said = _NOQA.search(line)
    if not said:
        return False
    codes = said["codes"]
    return codes is None or finding.code in {c.strip().lower() for c in codes.split(",")}


def unused_noqa(paths: Iterable[Path], quiet: Iterable[Finding]) -> list[Finding]:
    """A warning for each `-- noqa` (or code of one) in `paths` that silenced none of `quiet`:
    a stale one would hide the next warning of its line (ruff's RUF100)."""
    used: dict[tuple[Path, int | None], set[str]] = {}
    for finding in quiet:
        used.setdefault((finding.path.resolve(), finding.line), set()).add(finding.code)
    found: list[Finding] = []
    for path in paths:
        try:
            lines = path.read_text().splitlines()
        except (OSError, UnicodeDecodeError):
            continue  # a file that does not load is a finding of its own
        for number, line in enumerate(lines, 1):
            said = _NOQA.search(line)
            if not said:
                continue
            done = used.get((path.resolve(), number), set())
            codes = said["codes"]
            wanted = {c.strip().lower() for c in codes.split(",")} if codes else set()
            if (codes and wanted <= done) or (not codes and done):
                continue
            if codes:
                stale = sorted(wanted - done)
                one = len(stale) == 1
                message = (
                    f"noqa code{'' if one else 's'} {', '.join(stale)} silence{'s' if one else ''}"
                    f" no warning on this line; remove {'it' if one else 'them'}"
                )
            else:
                message = f"`{said[0]}` silences no warning on this line; remove it"
            found.append(Finding(path, number, said.start() + 1, "unused-noqa", message, "warning"))
    return found
