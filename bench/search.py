"""Search latency and recall at 10k / 50k / 200k / 1M chunks.

Vectors are realistic: each synthetic chunk is a real SciFact chunk embedding mixed with a
second one and a little noise, then normalised, and carries that chunk's real text (so BM25
sees real term statistics). Queries are real SciFact claims embedded by the model. For each
size an index file is written through the store (vec0 + FTS5 + documents), then:

- p50/p95 of the whole `search` call per mode (query embedding included), through the same
  code path as the MCP tool;
- the vector stage as those calls run it, after the query embedding
  (`vector_stage_in_calls`);
- recall@10 of the vector stage against exact float32 search;
- the vector stage alone against a plain numpy scan (float32 matmul + argpartition) of the
  same vectors, measured in the same run, query by query: each stage runs right after a
  scan that streamed every float32 vector through the caches (`vector_stage_*`, a cold
  worst case);
- the size of the vector file on disk (mapped: the page cache holds it, not the heap).

    .venv/bin/python bench/search.py                          # 10k,50k,200k,1M
    .venv/bin/python bench/search.py --sizes 10000,50000 --queries 100

Results: bench/results/search.json and the plot search.png; the previous commit's run, for
comparison, with its own interpreter: `../prev/.venv/bin/python bench/search.py --as-baseline`
(search.baseline.json).

Figures on: docs/benchmarks.md (the search table and the plot); docs/postgres.md builds on its
indexes.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import data
import numpy as np
from common import RESULTS, Stopwatch, parser_for, result_path, write_results


async def measure(db: Path, vectors: np.ndarray, queries: np.ndarray, query_texts: list[str],
                  repeats: int) -> dict:
    from pocketmcp.search.fuse import DEFAULT_PARAMS
    from pocketmcp.search.retrieve import candidates_for

    out: dict = {}
    started = time.perf_counter()
    async with data.reading(db) as reading:
        out["load_s"] = round(time.perf_counter() - started, 2)
        index = reading.index.vectors
        assert index.reason is None, index.reason  # the vector file answers, not SQLite
        out["vector_index_mib"] = round(index.path.stat().st_blocks * 512 / 2**20, 1)
        out.update(await search_calls(reading, query_texts, repeats))
        # The vector stage alone against a numpy scan, and recall against exact search.
        ids_all = np.arange(1, len(vectors) + 1)
        stage, scan, hits = Stopwatch(), Stopwatch(), 0
        for q in queries[:repeats]:
            with scan:
                exact_top = np.argpartition(-(vectors @ q), 10)[:10]

            def run(reader, q=q):
                with stage:
                    found, _, _ = index.search(reader.log, q, 10,
                                               candidates_for(index.live, DEFAULT_PARAMS))
                return found.tolist()

            got = await reading.index.run(run)
            hits += len(set(got) & set(ids_all[exact_top].tolist()))
        out |= {f"vector_stage_{k}": v for k, v in stage.summary().items()}
        out |= {f"numpy_scan_{k}": v for k, v in scan.summary().items()}
        out["stage_over_numpy"] = round(out["vector_stage_p50_ms"]
                                        / out["numpy_scan_p50_ms"], 3)
        out["recall@10"] = round(hits / (10 * repeats), 4)
    return out


async def search_calls(reading: Any, query_texts: list[str], repeats: int
                       ) -> dict[str, dict[str, float]]:
    """Whole search calls per mode, p50 / p95 in ms, the embedding of a new query included:
    each mode gets its own queries, so none is answered from the cache of query vectors.
    Also the vector stage as those calls run it (after the query embedding, in hybrid and
    vector calls): `vector_stage_in_calls`."""
    import pocketmcp.search.retrieve as lists
    import pocketmcp.search.run as ops

    out = {}
    in_calls = Stopwatch()
    real = lists._vector_list

    def timed(*args: Any, **kwargs: Any) -> Any:
        with in_calls:
            return real(*args, **kwargs)

    lists._vector_list = timed
    try:
        for m, mode in enumerate(("hybrid", "vector", "keyword")):
            calls = Stopwatch()
            for i in range(repeats):
                text = query_texts[(m * repeats + i) % len(query_texts)]
                with calls:
                    await ops.search(reading, text, top_k=10, mode=mode)
            out[mode] = calls.summary()
    finally:
        lists._vector_list = real
    out["vector_stage_in_calls"] = in_calls.summary()
    return out


def plot(results: list[dict], path: Path, startup: Path | None = None) -> None:
    """Latency per stage (p50 solid, p95 dashed) and start-up time against corpus size,
    log scales; start-up from bench/startup_scale.py's results when `startup` exists."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = [r["chunks"] for r in results]
    fig, (ax, up) = plt.subplots(1, 2, figsize=(11, 4.2), dpi=120,
                                 gridspec_kw={"width_ratios": [3, 2]})
    lines = (("hybrid call", "hybrid", "C0"), ("keyword call", "keyword", "C1"),
             ("vector call", "vector", "C2"))
    for label, mode, colour in lines:
        ax.plot(sizes, [r[mode]["p50_ms"] for r in results], "o-", color=colour,
                label=f"{label} p50")
        ax.plot(sizes, [r[mode]["p95_ms"] for r in results], "o--", color=colour,
                label=f"{label} p95")
    ax.plot(sizes, [r["vector_stage_p50_ms"] for r in results], "s-", color="C3",
            label="vector stage after an exact scan p50")
    ax.plot(sizes, [r["vector_stage_p95_ms"] for r in results], "s--", color="C3",
            label="vector stage after an exact scan p95")
    if all("vector_stage_in_calls" in r for r in results):
        ax.plot(sizes, [r["vector_stage_in_calls"]["p50_ms"] for r in results], "^-",
                color="C4", label="vector stage in calls p50")
        ax.plot(sizes, [r["vector_stage_in_calls"]["p95_ms"] for r in results], "^--",
                color="C4", label="vector stage in calls p95")
    ax.plot(sizes, [r["numpy_scan_p50_ms"] for r in results], "k:",
            label="numpy float32 scan p50")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("chunks in the index")
    ax.set_ylabel("ms (search calls include the query embedding)")
    ax.set_title("Search latency")
    ax.grid(True, which="both", alpha=0.3)
    ax.set_ylim(top=ax.get_ylim()[1] * 12)  # room above the lines for the legend
    ax.legend(fontsize=6.5, ncol=2, loc="upper left")
    up.plot(sizes, [r["load_s"] for r in results], "o-", color="C0",
            label="open + model load, in process")
    if startup is not None and startup.exists():
        rows = json.loads(startup.read_text())["results"]
        for code, colour, which in (("current", "C2", "this"), ("baseline", "C3", "previous")):
            got = [(r["chunks"], r[code]["first_search_s"]) for r in rows if code in r]
            if got:
                up.plot(*zip(*got, strict=True), "s-", color=colour,
                        label=f"spawn to first search ({which} commit)")
    up.set_xscale("log")
    up.set_yscale("log")
    up.set_xlabel("chunks in the index")
    up.set_ylabel("seconds")
    up.set_title("Start-up")
    up.grid(True, which="both", alpha=0.3)
    up.legend(fontsize=7)
    fig.suptitle("PocketMCP at scale (2 cores, 24 GB)")
    fig.tight_layout()
    fig.savefig(path)


def main() -> None:
    parser = parser_for(__doc__, "search")
    parser.add_argument("--sizes", default="10000,50000,200000,1000000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--base-docs", type=int, default=1500,
                        help="SciFact abstracts embedded for the base vectors")
    parser.add_argument("--base-index", type=Path,
                        help="take the base vectors from this index instead of embedding")
    parser.add_argument("--keep", type=Path, help="keep the index files in this folder")
    parser.add_argument("--startup", type=Path, default=result_path("startup_scale"),
                        help="bench/startup_scale.py's results for the plot's start-up panel")
    args = parser.parse_args()
    base, texts, queries, query_texts = data.base_vectors(args.base_docs, args.base_index)
    results = []
    with tempfile.TemporaryDirectory(prefix="pocketmcp-search-") as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        for n in (int(s) for s in args.sizes.split(",")):
            vectors, text_of = data.synthesise(base, n, seed=n)
            db = folder / f"search-{n}.db"
            if not db.exists():
                seconds = data.build_index(db, vectors, text_of, texts, content=False)
                print(f"built {n} chunks in {seconds:.0f} s", file=sys.stderr)
            data.prepare(db, vectors.shape[1])
            row = {"chunks": n, **anyio.run(measure, db, vectors, queries, query_texts,
                                             args.queries)}
            results.append(row)
            print(json.dumps(row), flush=True)
            if not args.keep:
                for suffix in ("", "-wal", "-shm", ".writer.lock"):
                    Path(str(db) + suffix).unlink(missing_ok=True)
    path = write_results(args, {"queries": args.queries, "results": results})
    if not args.as_baseline:  # the plot is of the latest run
        plot(results, path.with_suffix(".png") if args.out else RESULTS / "search.png",
             args.startup)


if __name__ == "__main__":
    main()
