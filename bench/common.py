"""What the benchmarks share: the project on the import path, waiting for a quiet machine, and
measuring a subprocess (wall clock, peak RSS and CPU of its process tree, the batch times in its
checkpoints), with the figures and lines printed for each run.

The scripts import it as ``common``: a script's own folder is first on the import path.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

PROJECT_DIR = Path(__file__).resolve().parent.parent
# The scripts (and the baseline subprocesses, which run a script again) import the project,
# also where it is not installed into the interpreter.
if str(PROJECT_DIR) not in sys.path:
    sys.path.insert(0, str(PROJECT_DIR))

RSS_POLL_S = 0.2
GIB = 1024**3
# Subprocess lines worth echoing live; the full output goes to a log file in the workdir.
ECHO_PREFIXES = ("[", "query ", "baseline ", "error", "Traceback")


# --- measuring a subprocess -------------------------------------------------------------------


@dataclass(frozen=True)
class QueryTimes:
    """One streaming query, from its checkpoint: first batch start, last commit, each batch."""

    start: float  # Unix time
    end: float
    batch_s: list[float]


@dataclass
class Measurement:
    """One timed subprocess: wall clock, peak tree RSS and its batch timings."""

    name: str
    command: list[str]
    exit_code: int
    started_at: float  # Unix time, comparable with file modification times
    wall_s: float
    peak_rss: int
    tree_cpu_s: float
    machine_busy_s: float
    log: Path
    report: list[str] = field(default_factory=list)
    queries: dict[str, QueryTimes] = field(default_factory=dict)  # by checkpoint folder

    @property
    def first_batch_at(self) -> float | None:
        """Unix time the earliest query planned its first batch."""
        return min((q.start for q in self.queries.values()), default=None)

    @property
    def streaming_s(self) -> float | None:
        """First batch start to last batch commit, over all queries."""
        if not self.queries:
            return None
        return max(q.end for q in self.queries.values()) - min(
            q.start for q in self.queries.values()
        )

    @property
    def startup_s(self) -> float | None:
        """Process start to first batch start: JVM, session, views, sink tables."""
        first = self.first_batch_at
        return None if first is None else first - self.started_at


def _sample_tree(root: psutil.Process, cpu: dict[int, float]) -> int:
    """Sum of RSS over a process and its descendants; records each one's CPU seconds in `cpu`.

    RSS counts pages shared by forked Python workers once per process, so the sum is an upper
    bound of the memory the tree really holds. A child that Java or Hadoop is spawning (vfork,
    before it runs its own program) shares its parent's address space: it is left out, as
    counting it would count the JVM twice. It is known by its parent's program and address
    space size, not by its RSS, which moves between the two reads.
    """
    try:
        procs = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0
    shapes: dict[int, tuple[str, int]] = {}
    total = 0
    for proc in procs:
        # Python workers come and go between listing and reading; a vanished one adds nothing.
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied), proc.oneshot():
            times = proc.cpu_times()
            cpu[proc.pid] = times.user + times.system
            mem = proc.memory_info()
            shapes[proc.pid] = shape = (proc.exe(), mem.vms)
            if shapes.get(proc.ppid()) != shape:
                total += mem.rss
    return total


def _busy_seconds() -> float:
    """CPU seconds the whole machine has spent busy since boot."""
    times = psutil.cpu_times()
    # Steal is time the hypervisor gave to other VMs: not work on this machine.
    return (
        times.user
        + times.system
        + getattr(times, "nice", 0.0)
        + getattr(times, "irq", 0.0)
        + getattr(times, "softirq", 0.0)
    )


def wait_until_quiet(max_wait_s: float, cores: float = 0.5, window_s: float = 2.0) -> float:
    """Wait up to `max_wait_s` until the machine uses under `cores` cores; returns the last load.

    Other people's jobs on the same 2 cores would be measured as slowness of ours.
    """
    deadline = time.monotonic() + max_wait_s
    told = False
    while True:
        before = _busy_seconds()
        time.sleep(window_s)
        load = (_busy_seconds() - before) / window_s
        if load < cores or time.monotonic() >= deadline:
            if told or load >= cores:
                print(f"machine load {load:.1f} cores; starting", flush=True)
            return load
        if not told:
            print(f"machine busy ({load:.1f} cores in use); waiting up to {max_wait_s:.0f} s")
            told = True


class TreeSampler(threading.Thread):
    """Polls a process tree until stopped: peak summed RSS and CPU seconds per process.

    The machine's busy seconds over the same span tell whether other work (another engineer's
    Spark job, say) competed for the cores during the measurement.
    """

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.root = psutil.Process(pid)
        self.peak = 0
        self.cpu: dict[int, float] = {}
        self.machine_busy = 0.0
        self._done = threading.Event()

    def run(self) -> None:
        busy0 = _busy_seconds()
        while not self._done.is_set():
            self.peak = max(self.peak, _sample_tree(self.root, self.cpu))
            self._done.wait(RSS_POLL_S)
        self.machine_busy = _busy_seconds() - busy0

    @property
    def tree_cpu(self) -> float:
        """CPU seconds of the tree (a process's last 0.2 s before it exits may be missed)."""
        return sum(self.cpu.values())

    def stop(self) -> None:
        self._done.set()
        self.join()


def _pump(stream: Any, log: Path, t0: float) -> None:
    """Copy the subprocess output to its log; echo progress lines with seconds since start."""
    with log.open("w") as out:
        for line in stream:
            out.write(line)
            if line.startswith(ECHO_PREFIXES):
                print(f"  {time.monotonic() - t0:7.1f}s | {line.rstrip()}", flush=True)


def checkpoint_timings(root: Path) -> dict[str, QueryTimes]:
    """Batch times of every query checkpoint under `root`, from file modification times.

    Spark writes ``offsets/<id>`` when it plans a batch and ``commits/<id>`` when the batch is
    done, so these times bracket the streaming work without the process's start-up.
    """
    timings: dict[str, QueryTimes] = {}
    for offsets in sorted(root.rglob("offsets")):
        commits = offsets.parent / "commits"
        planned = {int(f.name): f.stat().st_mtime for f in offsets.iterdir() if f.name.isdigit()}
        done = {
            int(f.name): f.stat().st_mtime
            for f in (commits.iterdir() if commits.is_dir() else [])
            if f.name.isdigit()
        }
        batches = sorted(set(planned) & set(done))
        if not batches:
            continue
        name = offsets.parent.relative_to(root).as_posix()
        timings[root.name if name == "." else name] = QueryTimes(
            start=planned[batches[0]],
            end=max(done.values()),
            batch_s=[done[b] - planned[b] for b in batches],
        )
    return timings


def measure(
    name: str, command: list[str], log: Path, checkpoints: Path, *, wait_idle_s: float = 0.0
) -> Measurement:
    """Run `command` from the project folder; time it, sample its memory, read its batches."""
    print(f"\n== {name}: {' '.join(command)}", flush=True)
    if wait_idle_s > 0:
        wait_until_quiet(wait_idle_s)
    started_at = time.time()
    t0 = time.monotonic()
    proc = subprocess.Popen(
        command,
        cwd=PROJECT_DIR,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        bufsize=1,
    )
    sampler = TreeSampler(proc.pid)
    sampler.start()
    pump = threading.Thread(target=_pump, args=(proc.stdout, log, t0), daemon=True)
    pump.start()
    exit_code = proc.wait()
    wall_s = time.monotonic() - t0  # at exit, before the output pump finishes draining
    sampler.stop()
    pump.join()
    lines = log.read_text().splitlines()
    result = Measurement(
        name=name,
        command=command,
        exit_code=exit_code,
        started_at=started_at,
        wall_s=wall_s,
        peak_rss=sampler.peak,
        tree_cpu_s=sampler.tree_cpu,
        machine_busy_s=sampler.machine_busy,
        log=log,
        report=[line for line in lines if line.startswith("query ")],
        queries=checkpoint_timings(checkpoints),
    )
    if exit_code != 0:
        print(f"!! {name} exited {exit_code}; last lines of {log}:", flush=True)
        for line in lines[-20:]:
            print(f"   {line}")
    return result


# --- figures ----------------------------------------------------------------------------------


def _rate(events: int, seconds: float | None) -> float | None:
    return events / seconds if seconds else None


def run_figures(events: int, runs: dict[str, Measurement]) -> dict[str, dict[str, Any]]:
    """Each run's numbers as plain data (figures.json's "runs"), with pipeline/X ratios."""
    out: dict[str, dict[str, Any]] = {}
    pipe = runs.get("pipeline")
    for key, m in runs.items():
        entry: dict[str, Any] = {
            "command": m.command,
            "exit_code": m.exit_code,
            "wall_s": round(m.wall_s, 3),
            "events_per_s": _rate(events, m.wall_s),
            "startup_s": m.startup_s,
            "streaming_s": m.streaming_s,
            "streaming_events_per_s": _rate(events, m.streaming_s),
            "peak_rss_bytes": m.peak_rss,
            "tree_cpu_s": round(m.tree_cpu_s, 1),
            # Busy CPU seconds on the machine outside the measured tree: competing work.
            "other_cpu_s": round(max(0.0, m.machine_busy_s - m.tree_cpu_s), 1),
            "queries": {
                q: {"streaming_s": t.end - t.start, "batch_s": t.batch_s}
                for q, t in m.queries.items()
            },
            "report": m.report,
            "log": str(m.log),
        }
        if pipe is not None and key != "pipeline":
            # Throughput ratio: how fast the pipeline goes compared with the baseline.
            entry["pipeline_ratio"] = m.wall_s / pipe.wall_s
            if m.streaming_s and pipe.streaming_s:
                entry["pipeline_ratio_streaming"] = m.streaming_s / pipe.streaming_s
        out[key] = entry
    return out


def rate(value: float | None) -> str:
    """Events per second, right-aligned, or a dash."""
    return f"{value:>9,.0f} events/s" if value else f"{'-':>9} events/s"


def secs(value: float | None) -> str:
    """Seconds, right-aligned, or a dash."""
    return f"{value:6.1f} s" if value is not None else f"{'-':>6} s"


def print_runs(runs: dict[str, dict[str, Any]], labels: dict[str, str]) -> None:
    """Per run: whole-process and from-first-batch figures; the pipeline's queries after it."""
    for key, r in runs.items():
        ratio = ratio_s = ""
        if "pipeline_ratio" in r:
            ratio = f"   events/s pipeline/{key} = {r['pipeline_ratio']:.2f}"
        if "pipeline_ratio_streaming" in r:
            ratio_s = f"   events/s pipeline/{key} = {r['pipeline_ratio_streaming']:.2f}"
        failed = "" if r["exit_code"] == 0 else f"   FAILED (exit {r['exit_code']})"
        print(
            f"{labels[key]:<24}{secs(r['wall_s'])} {rate(r['events_per_s'])}"
            f"   peak RSS {r['peak_rss_bytes'] / GIB:.1f} GiB{ratio}{failed}"
        )
        print(
            f"{'  from 1st batch':<24}{secs(r['streaming_s'])} {rate(r['streaming_events_per_s'])}"
            f"   start-up {secs(r['startup_s']).strip():>7}"
            f"   CPU {r['tree_cpu_s']:5.0f} s (other {r['other_cpu_s']:3.0f} s){ratio_s}"
        )
        # One query, `main`, unless the pipeline's `queries:` takes tables out into their own.
        for query, v in (r.get("queries") or {}).items() if key.startswith("pipeline") else ():
            batches = ", ".join(f"{b:.1f}" for b in v["batch_s"])
            label = f"  query {query.rsplit('/', 1)[-1]}"
            print(f"{label:<24}{secs(v['streaming_s'])}   batches: {batches} s")
