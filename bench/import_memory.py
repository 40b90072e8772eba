"""Peak memory of `pocketmcp import` against the longest line of the file: one document of
`--mb` MiB of text (its chunks covering it, waiting for their vectors), imported by a fresh
process into an index that has the export's model; the process's peak RSS less that of
importing a file of one small document. And the peak of Python's allocations (tracemalloc)
while the file is read and checked (ops/archive.py's `_read`, in a child of the same code):
what the import itself holds before the writer's transaction.

    .venv/bin/python bench/import_memory.py --mb 100
    .venv/bin/python bench/import_memory.py --mb 100 --code ../prev --out /tmp/prev.json
    .venv/bin/python bench/import_memory.py --mb 100 --store postgres
    .venv/bin/python bench/import_memory.py --mb 100 --accents
    .venv/bin/python bench/import_memory.py --mb 100 --steps

`--steps` adds the peak during each step of one import run in a process of its own
(SQLite: reading, then each statement of the writer), over what the process held before.
`--code` runs another checkout's package with this interpreter and libraries. `--store
postgres` imports into a throwaway PostgreSQL (the tests' server): the peak is the
`pocketmcp` process's alone, the server's memory is its own.

MAX_FILE_MB is set to the document's size, so the document is within the limits.

Results: bench/results/import_memory.json. Figures on: docs/reliability.md.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from common import parser_for, postgres, run_pocketmcp, server_env, write_results

from pocketmcp.ops.archive_check import chunk_digest

CHUNKS = 1000  # the most one document makes


WORDS = "lichen basalt quartz tundra heron otter comet glacier "
ACCENTED = "lichén basalt quartz tündra héron otter comète glacier "  # --accents: not ASCII


def _text(start: int, end: int, words: str = WORDS) -> str:
    """Characters `start` to `end` of the document: `words` over and over."""
    at = start % len(words)
    return (words * ((end - start) // len(words) + 2))[at:at + end - start]


def _export(header: str, path: Path, chars: int, words: str = WORDS) -> int:
    """An export of one document of `chars` characters, written a chunk at a time (this
    process holds no copy of it: a child forked from it would count it); the length of its
    line."""
    step = -(-chars // CHUNKS)
    spans = [(start, min(chars, start + step)) for start in range(0, chars, step)]
    chunks = [{"idx": idx, "start": start, "end": end, "tokens": 1, "section": "",
               "sha256": chunk_digest(_text(start, end, words), ""), "vector": None}
              for idx, (start, end) in enumerate(spans)]
    doc = {"type": "document", "external_id": "big", "source": "raw", "uri": None,
           "title": "Big", "library": "default", "metadata": {}, "properties": {}, "tags": [],
           "created": None, "modified": None, "links": [], "content": "@",
           "sha256": "0" * 64, "size_bytes": None, "mtime_ns": None, "chunks": chunks}
    before, after = json.dumps(doc).split('"@"')
    end = {"type": "end", "documents": 1, "chunks": len(chunks), "waiting": len(chunks)}
    with open(path, "w", encoding="utf-8") as out:
        out.write(f'{header}\n{before}"')
        for start, stop in spans:
            out.write(_text(start, stop, words))
        out.write(f'"{after}\n{json.dumps(end)}\n')
    # In bytes: the file less its first and last lines and the newlines.
    return path.stat().st_size - len(f"{header}\n{json.dumps(end)}\n".encode()) - 1


# Run by the checkout's interpreter: the peak of Python's allocations while `_read` reads
# and checks the file (its arguments differ between versions: given by name).
_READ = """
import inspect, json, sys, tracemalloc
from pathlib import Path
from pocketmcp.core.identity import Identity
from pocketmcp.ops import archive
header = json.loads(open(sys.argv[1]).readline())
identity = Identity(model=header["model_id"], dim=header["dim"])
given = {"path": Path(sys.argv[1]), "identity": identity, "roots": ()}
if "limits" in inspect.signature(archive._read).parameters:
    given["limits"] = (int(sys.argv[2]), 1000)
tracemalloc.start()
archive._read(**given)
print(tracemalloc.get_traced_memory()[1])
"""


# Run by the checkout's interpreter (`--steps`, SQLite): the file read and written by the
# SQLite writer in this process, the peak RSS (sampled every 2 ms) during each step, over the
# RSS before the file was read: what each statement adds to what the import holds.
_STEPS = """
import inspect, json, os, sys, threading, time
from pathlib import Path
from pocketmcp.core.identity import Identity
from pocketmcp.ops import archive
from pocketmcp.store.sqlite import writes
header = json.loads(open(sys.argv[1]).readline())
identity = Identity(model=header["model_id"], dim=header["dim"])
writer = writes.SqliteWriter(Path(sys.argv[3]), identity)
page, step, peaks = os.sysconf("SC_PAGE_SIZE"), ["read"], {}
def rss():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * page
def sample():
    while True:
        name, value = step[0], rss()
        if name == step[0]:  # a sample taken across two steps counts for neither
            peaks[name] = max(peaks.get(name, 0), value)
        time.sleep(0.002)
def labelled(run):
    def call(self, sql, args=()):
        step[0] = " ".join(sql.split()[:4])
        return run(self, sql, args)
    return call
writes.SqliteWriter._sql = labelled(writes.SqliteWriter._sql)
writes.SqliteWriter._many = labelled(writes.SqliteWriter._many)
given = {"path": Path(sys.argv[1]), "identity": identity, "roots": ()}
if "limits" in inspect.signature(archive._read).parameters:
    given["limits"] = (int(sys.argv[2]), 1000)
base = rss()
threading.Thread(target=sample, daemon=True).start()
_, docs = archive._read(**given)
with writer.transaction():
    for doc in docs:
        writer.upsert(doc.record, doc.chunks, None if doc.waiting else doc.vectors)
time.sleep(0.05)
print(json.dumps({k: round((v - base) / 2**20, 1) for k, v in peaks.items()}))
"""


def step_peaks(env: dict[str, str], path: Path, max_bytes: int, into: Path) -> dict[str, float]:
    """MiB over the RSS before reading, at most, while each step of the import ran."""
    into.parent.mkdir(parents=True)
    done = subprocess.run([sys.executable, "-c", _STEPS, str(path), str(max_bytes), str(into)],
                          env=env, capture_output=True, text=True, check=True, cwd=into.parent)
    found: dict[str, float] = json.loads(done.stdout)
    return found


def read_peak(env: dict[str, str], path: Path, max_bytes: int) -> int:
    """Bytes Python allocated at most while `_read` read and checked `path`."""
    # Run where no package is (`-c` puts the working folder first on the import path).
    done = subprocess.run([sys.executable, "-c", _READ, str(path), str(max_bytes)], env=env,
                          capture_output=True, text=True, check=True, cwd=path.parent)
    return int(done.stdout.strip())


@contextmanager
def _store(store: str, base: Path) -> Iterator[dict[str, str]]:
    """The settings of each index of the run: a SQLite file each, or a Postgres schema each
    on one throwaway server (`PG_SCHEMA` set per index by the caller)."""
    if store == "sqlite":
        yield {}
        return
    with postgres(base / "pg") as url:
        yield {"STORE": "postgres", "DATABASE_URL": url}


def main() -> int:
    parser = parser_for(__doc__, "import_memory")
    parser.add_argument("--mb", type=int, default=100, help="MiB of the document's text")
    parser.add_argument("--code", type=Path, default=None,
                        help="a checkout whose package imports (on PYTHONPATH)")
    parser.add_argument("--store", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--steps", action="store_true",
                        help="also the peak during each step (SQLite: each statement)")
    parser.add_argument("--accents", action="store_true",
                        help="a text that is not ASCII (accented words: UTF-8 of 1.1 bytes a "
                             "character)")
    args = parser.parse_args()
    python = Path(sys.executable)  # another checkout's package: on PYTHONPATH (server_env)
    with tempfile.TemporaryDirectory(dir="/tmp") as tmp, _store(args.store, Path(tmp)) as store:
        base = Path(tmp)
        (base / "kb").mkdir()
        (base / "kb" / "a.md").write_text("# A\n\nA small note about moss.\n")
        env = server_env(base / "made" / "index.db", base / "kb", code=args.code,
                         MAX_FILE_MB=str(args.mb + 1), **store, PG_SCHEMA="made")
        run_pocketmcp("index", "--json", env=env, python=python, cwd=base)
        run_pocketmcp("export", "--json", str(base / "small.jsonl"), env=env, python=python,
                      cwd=base)
        header = (base / "small.jsonl").read_text().splitlines()[0]
        longest = _export(header, base / "big.jsonl", args.mb * 2**20,
                          ACCENTED if args.accents else WORDS)
        read = read_peak(env, base / "big.jsonl", (args.mb + 1) * 2**20)
        steps = step_peaks(env, base / "big.jsonl", (args.mb + 1) * 2**20,
                           base / "steps" / "index.db") if args.steps else {}
        for name, mib in steps.items():
            print(f"{mib:6.0f} MiB  {name}", file=sys.stderr)
        peaks = {}
        for name in ("small.jsonl", "big.jsonl"):
            fresh = {**env, "SQLITE_PATH": str(base / f"into-{name}" / "index.db"),
                     "PG_SCHEMA": f"into_{name.split('.')[0]}"}
            ran = run_pocketmcp("import", "--json", str(base / name), env=fresh, python=python,
                                cwd=base)
            peaks[name] = round(ran.peak_rss_mib, 1)
            print(f"{name}: peak RSS {ran.peak_rss_mib:.0f} MiB, {ran.wall_s:.1f} s",
                  file=sys.stderr)
    extra = peaks["big.jsonl"] - peaks["small.jsonl"]
    ratio = extra * 2**20 / longest
    print(f"longest line {longest / 2**20:.0f} MiB; reading and checking it: "
          f"{read / 2**20:.0f} MiB at most ({read / longest:.2f} x the line); import peak "
          f"{peaks['big.jsonl']:.0f} MiB RSS, {extra:.0f} MiB over a small import: "
          f"{ratio:.2f} x the line", file=sys.stderr)
    write_results(args, {"mb": args.mb, "code": str(args.code or "."), "store": args.store,
                         "accents": args.accents,
                         "longest_line_mib": round(longest / 2**20, 1),
                         "read_peak_mib": round(read / 2**20, 1),
                         "read_times_the_line": round(read / longest, 2), "peak_rss_mib": peaks,
                         "over_small_mib": round(extra, 1), "times_the_line": round(ratio, 2),
                         "steps_mib": steps})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
