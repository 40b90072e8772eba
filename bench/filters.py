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

Figures on: docs/benchmarks.md (the filters table); docs/metadata.md.
"""

from __future__ import annotations

import datetime as dt
import json
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import data
from common import Stopwatch, parser_for, write_results

PER_DOC = 4


def facts(keep: float) -> Callable[[int], Any]:
    """Document d's facts: one in 1/`keep` modified in the last 7 days and tagged `recent`,
    the others older and tagged `archive`."""
    from pocketmcp.core import dates
    from pocketmcp.messages import DocFacts

    now = dt.datetime.now(dt.UTC)
    every = round(1 / keep)

    def of(d: int) -> Any:
        fresh = d % every == 0
        when = now - dt.timedelta(days=(d % 5) if fresh else 30 + d % 700)
        return DocFacts(tags=("recent",) if fresh else ("archive",),
                        modified=dates.iso(when), created=dates.iso(when))
    return of


async def measure(db: Path, query_texts: list[str], queries: int, top_k: int) -> dict[str, Any]:
    from pocketmcp.search.results import SearchFilter
    from pocketmcp.search.run import Scope, search

    cases = {
        "no filter": None,
        "modified_after 7d": Scope.of(SearchFilter.model_validate({"modified_after": "7d"})),
        "tags [recent]": Scope.of(SearchFilter.model_validate({"tags": ["recent"]})),
    }
    times = {name: Stopwatch() for name in cases}
    counts: dict[str, list[int]] = {name: [] for name in cases}
    async with data.reading(db) as reading:
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
    parser = parser_for(__doc__, "filters")
    parser.add_argument("--chunks", type=int, default=50_000)
    parser.add_argument("--keep", type=float, default=0.01, help="share of documents kept")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--top-k", type=int, default=10)
    parser.add_argument("--base-docs", type=int, default=1500)
    args = parser.parse_args()
    base, texts, _, query_texts = data.base_vectors(args.base_docs)
    vectors, text_of = data.synthesise(base, args.chunks, seed=args.chunks)
    with tempfile.TemporaryDirectory(prefix="pocketmcp-filters-") as tmp:
        db = Path(tmp) / "filters.db"
        seconds = data.build_index(db, vectors, text_of, texts, per_doc=PER_DOC,
                                   facts=facts(args.keep))
        recent = len(range(0, args.chunks // PER_DOC, round(1 / args.keep)))
        print(f"built {args.chunks} chunks ({recent} recent documents) in {seconds:.0f} s",
              file=sys.stderr)
        cases = anyio.run(measure, db, query_texts, args.queries, args.top_k)
    row = {"chunks": args.chunks, "documents": args.chunks // PER_DOC,
           "kept_documents": recent, "queries": args.queries, "top_k": args.top_k,
           "mode": "hybrid", "cases": cases}
    print(json.dumps(row, indent=2))
    write_results(args, row)


if __name__ == "__main__":
    main()
