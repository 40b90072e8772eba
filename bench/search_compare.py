"""Whole search calls and the vector stage, this checkout against another, in one run.

Two worker processes open the same index, one with this checkout's code and one with the
other's (its own .venv), and the driver sends them the same requests in turn, alternating
which goes first, so both see the same machine load. Per request kind it reports p50/p95 of
each and their ratio (this / other), the stages inside a search call (query embedding,
vector stage, keyword stage and, inside it, the term counts and the chunk FTS5 query), and
whether both returned the same results (chunk ids, order and scores as the tool returns
them, to 6 decimals).

Each mode gets its own SciFact queries, so no call is answered from the cache of query
vectors; the vector stage gets the queries' vectors from bench/search.py's cache. Each
`--index` is compared in turn; the results (bench/results/search_compare.json) hold both
checkouts' figures, so the other checkout is the baseline.

    .venv/bin/python bench/search_compare.py --index ../benchdata/search-1000000.db \\
        --index ../benchdata/search-50000.db --other ../baseline --queries 100

Figures on: docs/search.md (the search path's cost); docs/changelog.md (each change to search).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import data
from common import load_1min, parser_for, summary, venv_python, versions, write_results

MODES = ("hybrid", "vector", "keyword")
REPLY = "reply: "  # what starts a worker's replies (log lines may go to stdout too)
KERNELS = ("faiss-cpu", "numpy", "onnxruntime", "pysqlite3-binary")  # alike in both checkouts


# -- the worker: one checkout's code over the index ----------------------------------------


def worker(db: Path) -> None:
    import anyio

    anyio.run(_serve, db)


async def _serve(db: Path) -> None:
    import anyio
    import numpy as np


    stages: dict[str, float] = {}

    def timed(name: str, fn: Any) -> Any:
        def run(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter_ns()
            try:
                return fn(*args, **kwargs)
            finally:
                stages[name] = stages.get(name, 0.0) + (time.perf_counter_ns() - started) / 1e6
        return run

    # The stages of a call, timed where both checkouts have them: the vector list (the
    # search package's retrieve step, or the search op's stage before it), the reader's
    # keyword stage and, inside it, the term counts and the chunk FTS5 query.
    try:
        import pocketmcp.search.retrieve as lists
        import pocketmcp.search.run as ops
        lists._vector_list = timed("vector_stage", lists._vector_list)
    except ImportError:
        import pocketmcp.ops.search as ops  # type: ignore[no-redef]
        lists = ops  # type: ignore[assignment]
        ops._vector_stage = timed("vector_stage", ops._vector_stage)  # type: ignore[attr-defined]
    from pocketmcp.store.sqlite.queries import SqliteReader

    for name, method in (("keyword_stage", "keyword_stage"), ("  term_counts", "term_docs"),
                         ("  chunk_fts_query", "search_keyword")):
        setattr(SqliteReader, method, timed(name, getattr(SqliteReader, method)))
    queries = np.load(data.BASE)["queries"]
    async with data.reading(db) as reading:
        embedder = reading.embedder
        embed = embedder.embed_query

        async def embed_query(text: str) -> Any:
            started = time.perf_counter_ns()
            try:
                return await embed(text)
            finally:
                stages["embed"] = (time.perf_counter_ns() - started) / 1e6

        embedder.embed_query = embed_query  # type: ignore[method-assign]
        index = reading.index
        assert index.vectors.reason is None, index.vectors.reason
        print(REPLY + json.dumps({"ready": True, "kernels": versions(KERNELS)}), flush=True)
        while line := await anyio.to_thread.run_sync(sys.stdin.readline):
            ask = json.loads(line)
            stages.clear()
            if ask["kind"] == "stage":
                q = queries[ask["query"]]

                def nearest(reader: Any, q: Any = q) -> tuple[list[int], list[float], float]:
                    started = time.perf_counter_ns()
                    ids, scores, _ = index.vectors.search(
                        reader.log, q, 10, lists.candidates_for(index.live, ops.DEFAULT_PARAMS))
                    return ids.tolist(), scores.tolist(), (time.perf_counter_ns() - started) / 1e6

                ids, scores, ms = await index.run(nearest)
                out: dict[str, Any] = {"ms": ms, "result": [
                    [i, round(s, 6)] for i, s in zip(ids, scores, strict=True)]}
            else:
                started = time.perf_counter_ns()
                found = await ops.search(reading, ask["text"], top_k=10, mode=ask["kind"])
                ms = (time.perf_counter_ns() - started) / 1e6
                out = {"ms": ms, "stages": dict(stages), "result": [
                    [m.chunk_id, m.score, m.vector_score, m.keyword_score]
                    for m in found.matches]}
            print(REPLY + json.dumps(out), flush=True)


# -- the driver ----------------------------------------------------------------------------


class Worker:
    def __init__(self, python: Path, db: Path) -> None:
        self.proc = subprocess.Popen(
            [str(python), str(Path(__file__).resolve()), "--worker", str(db)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            text=True, cwd=python.parent.parent.parent)
        ready = json.loads(self.ask_line())
        assert ready["ready"]
        self.kernels: dict[str, str | None] = ready.get("kernels", {})

    def ask_line(self) -> str:
        assert self.proc.stdout is not None
        while line := self.proc.stdout.readline():
            if line.startswith(REPLY):
                return line[len(REPLY):]
        raise SystemExit(f"worker {self.proc.args[0]} stopped")

    def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        return dict(json.loads(self.ask_line()))

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


def compare(db: Path, other: Path, queries: int, warm: int,
            kernels_may_differ: bool = False, other_db: Path | None = None) -> dict[str, Any]:
    import numpy as np

    texts = [str(t) for t in np.load(data.BASE)["query_texts"]]
    workers = {"this": Worker(Path(sys.executable), db),
               "other": Worker(venv_python(other), other_db or db)}
    mine, theirs = workers["this"].kernels, workers["other"].kernels
    if mine != theirs and not kernels_may_differ:
        for w in workers.values():
            w.close()
        raise SystemExit(f"the two checkouts load different libraries: this {mine}, other "
                         f"{theirs} (set up the other with scripts/setup.sh, or pass "
                         "--kernels-may-differ when that is what is compared)")
    kinds = ("stage", *MODES)
    times: dict[str, dict[str, list[float]]] = {k: {"this": [], "other": []} for k in kinds}
    stages: dict[str, dict[str, list[float]]] = {}
    same = dict.fromkeys(kinds, 0)
    load = [load_1min()]
    try:
        for i in range(-warm, queries):
            for k, kind in enumerate(kinds):
                # Warm-up requests use the last queries; the measured ones each their own.
                n = len(texts) + i if i < 0 else (k * queries + i) % len(texts)
                request = {"kind": kind, "query": n, "text": texts[n]}
                order = ("this", "other") if (i + k) % 2 == 0 else ("other", "this")
                got = {who: workers[who].ask(request) for who in order}
                if i < 0:
                    continue
                same[kind] += got["this"]["result"] == got["other"]["result"]
                for who, reply in got.items():
                    times[kind][who].append(reply["ms"])
                    for stage, ms in reply.get("stages", {}).items():
                        if kind == "hybrid":
                            stages.setdefault(stage, {"this": [], "other": []})[who].append(ms)
            if i % 10 == 0:
                load.append(load_1min())
    finally:
        for w in workers.values():
            w.close()
    out: dict[str, Any] = {"index": str(db), "other": str(other), "queries": queries,
                           "load_1min": load, "kernels": {"this": mine, "other": theirs}}
    for kind in kinds:
        this, that = summary(times[kind]["this"]), summary(times[kind]["other"])
        out[kind] = {"this": this, "other": that, "same_results": f"{same[kind]}/{queries}",
                     "p50_ratio": round(this["p50_ms"] / that["p50_ms"], 3),
                     "p95_ratio": round(this["p95_ms"] / that["p95_ms"], 3)}
    out["hybrid_stages"] = {stage: {who: summary(v) for who, v in by.items() if v}
                            for stage, by in stages.items()}
    return out


def main() -> None:
    parser = parser_for(__doc__, "search_compare")
    parser.add_argument("--index", type=Path, action="append",
                        help="an index kept by bench/search.py --keep (again for more)")
    parser.add_argument("--other", type=Path,
                        help="the other checkout (with its own .venv)")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--other-index", type=Path, action="append",
                        help="a copy of each --index for the other checkout, in the order "
                             "given: when this code's schema is newer than the other's")
    parser.add_argument("--warm", type=int, default=5, help="requests not measured, first")
    parser.add_argument("--kernels-may-differ", action="store_true",
                        help="compare even when the checkouts load different library versions")
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker)
        return
    if args.index is None or args.other is None:
        parser.error("--index and --other are needed")
    copies = args.other_index or [None] * len(args.index)
    if len(copies) != len(args.index):
        parser.error("one --other-index for each --index")
    results = []
    for db, copy in zip(args.index, copies, strict=True):
        results.append(compare(db.resolve(), args.other.resolve(), args.queries, args.warm,
                               args.kernels_may_differ, copy.resolve() if copy else None))
        print(json.dumps(results[-1], indent=2))
    write_results(args, {"results": results})


if __name__ == "__main__":
    main()
