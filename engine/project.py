"""The project's folders, all found from one root: the one place that knows the layout."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["PROJECT", "Project", "shown"]


@dataclass(frozen=True)
class Project:
    """A project folder: `pipelines/`, `sql/`, `tables/` and `quality/suites/` side by side."""

    root: Path
    #: The specs' folder when `--pipelines` names one of another name than `pipelines`.
    specs: Path | None = None

    @classmethod
    def of_pipelines(cls, folder: Path) -> Project:
        """The project whose pipelines folder is `folder` (`--pipelines` moves them all): its
        other folders sit beside it."""
        folder = folder.resolve()
        return cls(folder.parent, None if folder.name == "pipelines" else folder)

    @property
    def pipelines(self) -> Path:
        """Pipeline specs, one `<name>.yaml` each."""
        return self.specs or self.root / "pipelines"

    @property
    def sql(self) -> Path:
        """SQL folders, one per pipeline (a spec's `sql:` is relative to the root)."""
        return self.root / "sql"

    @property
    def tables(self) -> Path:
        """Table DDL, one `<table>.sql` each."""
        return self.root / "tables"

    @property
    def suites(self) -> Path:
        """Quality suites, one `<table>.yaml` each."""
        return self.root / "quality" / "suites"


#: The project this engine was installed with (the repository's own folders).
PROJECT = Project(Path(__file__).resolve().parent.parent)


def shown(path: Path | str) -> Path:
    """`path` as a user at the working folder names it: relative to it when below it, else as
    given."""
    try:
        return Path(path).resolve().relative_to(Path.cwd().resolve())
    except ValueError:
        return Path(path)
