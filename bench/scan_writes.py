"""The index writes of a first scan, timed alone: what the writer costs, apart from the
stages that feed it.

A generated folder of notes (the one `keywords_first.py` makes) is indexed once for keywords
(`pocketmcp index --keywords-first`), and every batch the writer received is kept. The
batches are then written again into a new index, in one thread, by this checkout and (with
`--base`) by an earlier one, alternating: the wall and CPU seconds of the writes alone, and
of the SQLite statements among them.

    .venv/bin/python bench/scan_writes.py --notes 10000 --base ../prev --repeats 3

Results: bench/results/scan_writes.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from common import ROOT, add_result_args, load_1min, write_results
from keywords_first import write_notes

# Run in a child: index the folder for keywords, keeping each batch the writer received.
KEEP = """
import pickle, sys
import pocketmcp.pipeline.writer as writer
from pocketmcp import cli
kept, identity = [], []
applied = writer.apply_batch
def keep(store, items):
    identity[:] = [store.identity]
    kept.append(list(items))
    return applied(store, items)
writer.apply_batch = keep
code = cli.main(["index", "--keywords-first", "--json"])
with open(sys.argv[1], "wb") as out:
    pickle.dump((identity[0], kept), out)
sys.exit(code)
"""

# Run in a child, with the code to measure first on the path: write the batches again.
WRITE = """
import json, pickle, sys, time
from pathlib import Path
from pocketmcp.pipeline.batches import apply_batch
from pocketmcp.store.sqlite import writes
identity, batches = pickle.load(open(sys.argv[1], "rb"))
spent = [0.0]
for name in ("_sql", "_many"):
    plain = getattr(writes.SqliteWriter, name)
    def timed(self, *args, plain=plain):
        started = time.perf_counter()
        try:
            return plain(self, *args)
        finally:
            spent[0] += time.perf_counter() - started
    setattr(writes.SqliteWriter, name, timed)
store = writes.SqliteWriter(Path(sys.argv[2]), identity)
wall, cpu = time.perf_counter(), time.process_time()
for batch in batches:
    apply_batch(store, batch)
wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
store.close()
print(json.dumps({"wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
                  "sql_s": round(spent[0], 2), "batches": len(batches),
                  "items": sum(len(b) for b in batches)}))
"""


def keep_batches(folder: Path, kept: Path, db: Path) -> None:
    env = {**os.environ, "WATCH_DIR": str(folder), "SQLITE_PATH": str(db), "LOG_LEVEL": "error",
           "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-c", KEEP, str(kept)], env=env, check=True,
                   stdout=subprocess.DEVNULL)


def write_again(kept: Path, db: Path, code: Path) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(code)}
    done = subprocess.run([sys.executable, "-c", WRITE, str(kept), str(db)], env=env,
                          check=True, capture_output=True, text=True)
    return dict(json.loads(done.stdout))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--notes", type=int, default=10000)
    parser.add_argument("--base", type=Path, default=None,
                        help="a checkout of earlier code whose writes are timed too, "
                             "alternating with this one (same interpreter and packages)")
    parser.add_argument("--repeats", type=int, default=3)
    add_result_args(parser, "scan_writes")
    args = parser.parse_args()
    results: dict[str, Any] = {"load_1min_before": load_1min(), "notes": args.notes}
    codes = {"this": ROOT, **({"base": args.base.resolve()} if args.base else {})}
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in codes}
    with tempfile.TemporaryDirectory(prefix="pocketmcp-writes-") as tmp:
        base = Path(tmp)
        folder = base / "notes"
        folder.mkdir()
        write_notes(folder, args.notes)
        kept = base / "batches.pickle"
        keep_batches(folder, kept, base / "kept" / "index.db")
        for i in range(args.repeats):
            for name, code in reversed(codes.items()):  # the earlier code first
                run = write_again(kept, base / f"{name}{i}" / "index.db", code)
                runs[name].append(run)
                print(f"{name}: {run}", flush=True)
    results["runs"] = runs
    results["load_1min_after"] = load_1min()
    if "base" in runs:
        results["cpu_ratio"] = round(min(r["cpu_s"] for r in runs["base"])
                                     / min(r["cpu_s"] for r in runs["this"]), 3)
        results["sql_ratio"] = round(min(r["sql_s"] for r in runs["base"])
                                     / min(r["sql_s"] for r in runs["this"]), 3)
        print(f"base / this, best runs: CPU {results['cpu_ratio']}, "
              f"SQLite statements {results['sql_ratio']}", flush=True)
    write_results(args, results)


if __name__ == "__main__":
    main()
