"""Where the vector stage's time goes, pass by pass, numpy alone against faiss's kernels
alternating in one run (so both see the same machine load).

Opens a vector file read-only (an index's `*.db.vectors`) and runs the passes of
vectors/index.py on SciFact query vectors (bench/search.py's cache): the shortlist (with
numpy, the Hamming pass over every row and then the cut; with faiss, scan.shortlist, which
cuts each piece while its distances are in cache), the asymmetric pass, the float16
rescoring. Per pass it reports p50/p95/min of each; it checks that both return the same top 10
for every query, and measures recall@10 against an exact scan of the float16 rows (for the
first --recall queries). It also reports the time to copy the codes row by row for faiss
and faiss's import time (in a fresh interpreter).

    .venv/bin/python bench/vector_stages.py --vectors ../benchdata/search-1000000.db.vectors

Results: bench/results/vector_stages.json (numpy's passes are the baseline, in the same run).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path
from typing import Any

import numpy as np
from common import add_result_args, load_1min, ms_since, summary, write_results
from data import BASE

STAGES = ("shortlist", "asymmetric", "float16", "total")


def import_ms() -> float:
    code = "import time; t = time.perf_counter(); import faiss; print(time.perf_counter() - t)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    return round(float(out.stdout.strip()) * 1e3, 1)


def main() -> None:
    from pocketmcp.store.sqlite.threads import Threads
    from pocketmcp.store.sqlite.vectors import scan
    from pocketmcp.store.sqlite.vectors.file import open_columns
    from pocketmcp.store.sqlite.vectors.index import SHORTLIST
    from pocketmcp.store.sqlite.vectors.rowcodes import RowCodes, kernel

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vectors", type=Path, required=True)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--recall", type=int, default=100, help="queries checked for recall")
    add_result_args(parser, "vector_stages")
    args = parser.parse_args()

    cols = open_columns(args.vectors.resolve(), args.dim)
    state = cols.state()
    assert state is not None and state.live == state.rows, "a file without removed rows"
    n = state.rows
    candidates = max(1000, n // 500)  # search.retrieve.candidates_for
    assert kernel() is not None, "faiss is not installed"
    started = time.perf_counter()
    copy = RowCodes(cols.capacity, cols.codes.shape[0])
    copy.extend(cols.codes, n)
    copy_ms = ms_since(started)
    cols.f16[:n].view(np.uint8)[:, ::4096].max()  # the float16 pages mapped, as _warm does
    queries = np.load(BASE)["queries"].astype(np.float32)[:args.queries]
    real_loaded = scan.loaded

    def no_faiss() -> None:
        return None

    dead = scan.words(args.dim) * 64 + 1
    times: dict[str, dict[str, list[float]]] = {
        kind: {s: [] for s in STAGES} for kind in ("numpy", "faiss")}
    tops: dict[str, list[list[int]]] = {"numpy": [], "faiss": []}
    load = [load_1min()]
    # The two threads an index lends its passes, closed after them.
    with closing(Threads(2, "pocketmcp.scan")) as pool:
        for i, q in enumerate(queries):
            order = ("numpy", "faiss") if i % 2 == 0 else ("faiss", "numpy")
            for kind in order:
                fast = kind == "faiss"
                scan.loaded = real_loaded if fast else no_faiss  # type: ignore[assignment]
                t0 = time.perf_counter()
                qcode = scan.encode(q[None, :], cols.mean)[0]
                keep = candidates * SHORTLIST
                rows = scan.shortlist(copy, n, qcode, keep, dead, pool=pool) if fast else None
                if rows is None:
                    dist = scan.hamming(cols.codes, n, qcode, None, copy if fast else None,
                                        pool=pool)
                    rows = scan.within(dist, keep, dead, pool=pool)
                t1 = time.perf_counter()
                planes, low, step = scan.query_planes(q, cols.mean)
                estimate = scan.asymmetric(cols.codes, rows, planes, low, step,
                                           copy if fast else None)
                picked = np.sort(rows[scan.top(estimate, candidates)])
                t2 = time.perf_counter()
                scores = scan.dot16(cols.f16, picked, q)
                best = picked[scan.top(scores, 10)]
                t3 = time.perf_counter()
                for stage, ms in zip(STAGES, (t1 - t0, t2 - t1, t3 - t2, t3 - t0), strict=True):
                    times[kind][stage].append(ms * 1e3)
                tops[kind].append(best.tolist())
            if i % 10 == 0:
                load.append(load_1min())
    hits = 0
    checked = min(args.recall, len(queries))
    for i in range(checked):
        exact = np.empty(n, np.float32)
        for lo in range(0, n, 65536):
            hi = min(n, lo + 65536)
            exact[lo:hi] = cols.f16[lo:hi].astype(np.float32) @ queries[i]
        hits += len(set(np.argpartition(-exact, 10)[:10].tolist()) & set(tops["faiss"][i]))
    out: dict[str, Any] = {
        "vectors": str(args.vectors), "rows": n, "queries": len(queries), "load_1min": load,
        "row_copy_ms": round(copy_ms, 1), "row_copy_mb": round(copy.nbytes(n) / 2**20, 1),
        "faiss_import_ms": import_ms(),
        "same_top10": f"{sum(a == b for a, b in zip(*tops.values(), strict=True))}/"
                      f"{len(queries)}",
        f"recall@10_vs_exact_float16_{checked}q": round(hits / (10 * max(1, checked)), 4),
    }
    for stage in STAGES:
        row: dict[str, Any] = {}
        for kind in ("numpy", "faiss"):
            v = times[kind][stage]
            row[kind] = {**summary(v), "min_ms": round(min(v), 2)}
        row["p50_ratio"] = round(row["faiss"]["p50_ms"] / row["numpy"]["p50_ms"], 3)
        out[stage] = row
    print(json.dumps(out, indent=2))
    write_results(args, out)


if __name__ == "__main__":
    main()
