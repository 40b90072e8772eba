"""Search latency with a filter that keeps 1% of the index, against no filter.

An index of N chunks (default 50,000; 4 chunks a document) is built as bench/search.py builds
its own: real SciFact chunk embeddings mixed in pairs, with real chunk texts. 1% of the
documents were modified in the last 7 days and carry the tag `recent`; the rest are older.
Then, for 200 real SciFact claims, whole `search` calls (query embedding included, through
the tool's code path) run with no filter, with `modified_after: "7d"` and with
`tags: ["recent"]`, the three alternating query by query so that load on the machine falls on
all of them alike. Reported: p50/p95 per case, and how many results each call returned
(a filter applied after the top-k would return fewer than top_k).

    .venv/bin/python bench/filters.py
    .venv/bin/python bench/filters.py --chunks 50000 --queries 200 --top-k 10

Results: bench/results/filters.json.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import data
import numpy as np
from common import Stopwatch, add_result_args, write_results

PER_DOC = 4


def build(path: Path, vectors: np.ndarray, text_of: np.ndarray, texts: list[str],
          keep: float) -> int:
    """The index, written through the store; how many documents are recent."""
    from pocketmcp.core import dates
    from pocketmcp.core.identity import Identity
    from pocketmcp.messages import DocFacts, DocRecord
    from pocketmcp.store.sqlite.writes import SqliteWriter

    now = dt.datetime.now(dt.UTC)
    every = round(1 / keep)
    writer = SqliteWriter(path, Identity(model=data.MODEL, dim=vectors.shape[1]))
    recent = 0
    try:
        docs = len(vectors) // PER_DOC
        for start in range(0, docs, 1000):
            writer.begin()
            for d in range(start, min(docs, start + 1000)):
                fresh = d % every == 0
                recent += fresh
                when = now - dt.timedelta(days=(d % 5) if fresh else 30 + d % 700)
                chunks, content = data.synthetic_doc(d, PER_DOC, texts, text_of)
                facts = DocFacts(tags=("recent",) if fresh else ("archive",),
                                 modified=dates.iso(when), created=dates.iso(when))
                writer.upsert(DocRecord(external_id=f"file:doc{d}.md", source="file", uri=None,
                                        title=f"Document {d}", content=content,
                                        sha256=str(d),
                                        facts=facts),
                              chunks, vectors[d * PER_DOC:(d + 1) * PER_DOC].tobytes())
            writer.commit()
    finally:
        writer.close()
    return recent


async def measure(db: Path, query_texts: list[str], queries: int, top_k: int) -> dict[str, Any]:
    from pocketmcp.config import load
    from pocketmcp.plans import READING
    from pocketmcp.runtime import open_runtime
    from pocketmcp.search.results import SearchFilter
    from pocketmcp.search.run import Scope, search

    config = load({}, environ={"SQLITE_PATH": str(db), "WATCH_DIR": str(db.parent / "none")})
    cases = {
        "no filter": None,
        "modified_after 7d": Scope.of(SearchFilter.model_validate({"modified_after": "7d"})),
        "tags [recent]": Scope.of(SearchFilter.model_validate({"tags": ["recent"]})),
    }
    times = {name: Stopwatch() for name in cases}
    counts: dict[str, list[int]] = {name: [] for name in cases}
    async with open_runtime(config, READING) as runtime:
        await runtime.started()
        reading = await runtime.reading()
        for scope in cases.values():  # warm every path once
            await search(reading, "warm up", top_k=top_k, scope=scope)
        for i in range(queries):
            text = query_texts[i % len(query_texts)]
            for name, scope in cases.items():
                with times[name]:
                    result = await search(reading, text, top_k=top_k, scope=scope)
                counts[name].append(len(result.matches))
    return {name: {**watch.summary(), "results_min": min(counts[name]),
                   "results_mean": round(statistics.mean(counts[name]), 2)}
            for name, watch in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=50_000)
    parser.add_argument("--keep", type=float, default=0.01, help="share of documents kept")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--top-k", type=int, default=10)
    parser.add_argument("--base-docs", type=int, default=1500)
    add_result_args(parser, "filters")
    args = parser.parse_args()
    base, texts, _, query_texts = data.base_vectors(args.base_docs)
    vectors, text_of = data.synthesise(base, args.chunks, seed=args.chunks)
    with tempfile.TemporaryDirectory(prefix="pocketmcp-filters-") as tmp:
        db = Path(tmp) / "filters.db"
        started = time.perf_counter()
        recent = build(db, vectors, text_of, texts, args.keep)
        print(f"built {args.chunks} chunks ({recent} recent documents) in "
              f"{time.perf_counter() - started:.0f} s", file=sys.stderr)
        cases = anyio.run(measure, db, query_texts, args.queries, args.top_k)
    row = {"chunks": args.chunks, "documents": args.chunks // PER_DOC,
           "kept_documents": recent, "queries": args.queries, "top_k": args.top_k,
           "mode": "hybrid", "cases": cases}
    print(json.dumps(row, indent=2))
    write_results(args, row)


if __name__ == "__main__":
    main()
