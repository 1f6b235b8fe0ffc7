"""Synthetic input data for the pipelines, and what their generators share: the summary they
return, where their lines go, and the registry `runner.py generate` dispatches through."""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from tqdm import tqdm

from engine.errors import UserError

__all__ = [
    "Generator",
    "Summary",
    "generate",
    "generators",
    "open_lines",
    "prepare_folder",
    "progress_bar",
    "write_part",
    "write_parts",
]


class Summary:
    """What a generator wrote: each generator's frozen dataclass of counts, which has at least
    these two fields (in its own order, the order they are printed in)."""

    lines: int
    files: int  # 0 for Kafka output

    def as_dict(self) -> dict[str, object]:
        """Return the summary as plain data (dicts copied)."""
        return asdict(self)  # type: ignore[call-overload]

    def line(self) -> str:
        """One line, `name value, ...` in field order: what `runner.py generate` prints."""
        return ", ".join(f"{k} {v}" for k, v in self.as_dict().items())


class GenerateFunction(Protocol):
    """The signature every generator function shares (each has its own options besides)."""

    def __call__(
        self,
        out: str | Path,
        *,
        events: int,
        seed: int = 0,
        faults: bool = False,
        progress: bool = False,
    ) -> Summary: ...


@dataclass(frozen=True)
class Generator:
    """A pipeline's generator: its function, and whether it writes a Kafka topic itself (one
    stream of lines, `open_lines`); the others lay out part files, whose lines ``--out
    kafka://`` sends on in order."""

    function: GenerateFunction
    kafka: bool


def generators() -> dict[str, Generator]:
    """The generators by pipeline name."""
    # Imported here, not at the top: each generator module imports this package's helpers.
    from devtools.generators.order_status import generate_order_status
    from devtools.generators.sensor_cep import generate_sensor_cep
    from devtools.generators.server_logs import generate_server_logs
    from devtools.generators.user_activity import generate_user_activity

    return {
        "order_status": Generator(generate_order_status, kafka=True),
        "sensor_cep": Generator(generate_sensor_cep, kafka=True),
        "server_logs": Generator(generate_server_logs, kafka=False),
        "user_activity": Generator(generate_user_activity, kafka=False),
    }


def generate(
    pipeline: str,
    out: str,
    *,
    events: int,
    seed: int = 0,
    faults: bool = False,
    progress: bool = False,
) -> Summary:
    """Run `pipeline`'s generator into the folder or ``kafka://HOST:PORT/TOPIC`` `out`;
    UserError for a pipeline without one or an output it cannot write."""
    known = generators()
    generator = known.get(pipeline)
    if generator is None:
        raise UserError(
            f"generate: no generator for pipeline '{pipeline}' (have: {', '.join(sorted(known))})"
        )
    options = {"events": events, "seed": seed, "faults": faults, "progress": progress}
    try:
        if out.startswith("kafka:") and not generator.kafka:
            return _through_folder(generator.function, out, options)
        return generator.function(out, **options)
    except FileExistsError:
        raise UserError(f"--out: {out} exists and is not empty") from None


def _through_folder(function: GenerateFunction, out: str, options: dict[str, Any]) -> Summary:
    """Run a generator of part files into a scratch folder, then send their lines to the
    topic in file order, as the bytes written, split where Spark splits lines; the broker is
    checked first."""
    from devtools.generators.kafka_out import KafkaTopic, parse_kafka_url

    topic = KafkaTopic(*parse_kafka_url(out))
    try:
        with tempfile.TemporaryDirectory(prefix="generate-") as scratch:
            folder = Path(scratch) / "parts"
            summary = function(folder, **options)
            parts = sorted(folder.glob("part-*.json"))
            topic.write((line, None) for p in parts for line in p.read_bytes().splitlines())
    finally:
        topic.close()
    return replace(summary, files=0)  # type: ignore[type-var]


@contextmanager
def progress_bar(
    *, total: int, unit: str, desc: str, done: Callable[[], int], enabled: bool
) -> Iterator[Callable[[], None]]:
    """Yield a function that moves a tqdm bar on stderr to `done()` (and does at the end)."""
    with tqdm(total=total, unit=unit, desc=desc, file=sys.stderr, disable=not enabled) as bar:

        def report() -> None:
            bar.update(done() - bar.n)

        yield report
        report()


@contextmanager
def open_lines(
    out: str | Path, *, lines_per_file: int
) -> Iterator[Callable[[Iterable[tuple[str, str | None]], Callable[[], None]], int]]:
    """Open ``kafka://HOST:PORT/TOPIC`` or the folder `out` (checking the broker, or that the
    folder is empty) and yield a function that writes `(text, key)` lines there, moving a
    progress bar with its `report`, and returns the files written (0 for Kafka)."""
    if isinstance(out, str) and out.startswith("kafka:"):
        from devtools.generators.kafka_out import KafkaTopic, parse_kafka_url

        kafka = KafkaTopic(*parse_kafka_url(out))

        def produce(lines: Iterable[tuple[str, str | None]], report: Callable[[], None]) -> int:
            kafka.write(lines, report)
            return 0

        try:
            yield produce
        finally:
            kafka.close()
        return
    folder = prepare_folder(Path(out))
    yield lambda lines, report: write_parts(
        (text for text, _ in lines), folder, lines_per_file, report
    )


def prepare_folder(folder: Path) -> Path:
    """Create `folder` for part files; FileExistsError if it exists and is not empty."""
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise FileExistsError(f"{folder} exists and is not an empty folder")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def write_part(folder: Path, number: int, lines: Sequence[str], started_ns: int) -> None:
    """Write ``folder/part-NNNNN.json`` (one line each) with mtime ``started_ns + number`` s."""
    final = folder / f"part-{number:05d}.json"
    # A dot name hides the half-written file from Spark's file source until the rename.
    partial = folder / f".{final.name}.tmp"
    with partial.open("w", encoding="utf-8", newline="\n") as handle:
        handle.write("\n".join(lines))
        handle.write("\n")
    # Spark's file source reads files in modification-time order; equal times (files written
    # within a millisecond) would let it read them out of order.
    stamp = started_ns + number * 1_000_000_000
    os.utime(partial, ns=(stamp, stamp))
    os.replace(partial, final)


def write_parts(
    lines: Iterable[str],
    folder: Path,
    lines_per_file: int,
    report: Callable[[], None] = lambda: None,
) -> int:
    """Write ``lines`` as full part files of ``lines_per_file`` lines; return how many files.

    File times start a day back, one second apart (see :func:`write_part`). ``report`` is
    called after each full file, e.g. to move a progress bar.
    """
    buffer: list[str] = []
    files = 0
    started_ns = time.time_ns() - 86_400 * 1_000_000_000
    for text in lines:
        buffer.append(text)
        if len(buffer) >= lines_per_file:
            files += 1
            write_part(folder, files, buffer, started_ns)
            buffer = []
            report()
    if buffer:
        files += 1
        write_part(folder, files, buffer, started_ns)
    return files
