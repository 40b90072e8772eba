"""What a search with one match per document costs with the rule of long pages: each
document by its best chunk for words and its mean meaning over all its chunks
(search/shape.py), against the rule of short texts (whole-document BM25, the best chunk's
meaning) on the same index, in one process, alternating which goes first.

Each query is searched once before timing, so both rules get its vector from the model's
cache of query vectors; the figures are retrieve and fuse, the part the rules change.
`--from` forces the rule of long pages on an index of fewer chunks a document (e.g. the
50,000-chunk bench index, 4 a document, with `--from 1`).

    .venv/bin/python bench/long_pages.py --index DIR/hatch.db --queries bench/realdocs/queries.jsonl
    .venv/bin/python bench/long_pages.py --index COPY/search-50000.db --from 1

Results: bench/results/long_pages.json.

Figures on: docs/search.md (documents of long pages).
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path
from typing import Any

import anyio
import data
import numpy as np
from common import parser_for, write_results

from pocketmcp.search.fuse import Params, fuse
from pocketmcp.search.retrieve import retrieve

ROUNDS = 3


async def measure(index: Path, texts: list[str], start: float) -> dict[str, Any]:
    rules = {"long pages": Params(best_chunk_from=start),
             "short texts": Params(best_chunk_from=float("inf"))}
    times: dict[str, list[float]] = {name: [] for name in rules}
    async with data.reading(index) as reading:
        for text in texts:
            await retrieve(reading, text, mode="hybrid", depth=200, unique_docs=True)
        for rnd in range(ROUNDS):
            order = list(rules) if rnd % 2 == 0 else list(reversed(rules))
            for text in texts:
                for name in order:
                    started = time.perf_counter()
                    found = await retrieve(reading, text, mode="hybrid", depth=200,
                                           unique_docs=True, params=rules[name])
                    fuse(found.stage, "hybrid", rules[name], True)
                    times[name].append((time.perf_counter() - started) * 1000)
    return {name: {"p50_ms": round(statistics.median(t), 3),
                   "p95_ms": round(float(np.percentile(t, 95)), 3), "searches": len(t)}
            for name, t in times.items()}


def main() -> None:
    parser = parser_for(__doc__, "long_pages")
    parser.add_argument("--index", type=Path, required=True)
    parser.add_argument("--queries", type=Path,
                        help="queries.jsonl (default: the bench's SciFact claims, 100)")
    parser.add_argument("--from", dest="start", type=float, default=Params().best_chunk_from,
                        help="chunks a document from which the rule of long pages holds")
    args = parser.parse_args()
    if args.queries:
        texts = [json.loads(line)["text"] for line in args.queries.read_text().splitlines()
                 if line.strip()]
    else:
        texts = [str(t) for t in np.load(data.BASE)["query_texts"]][:100]
    result = anyio.run(measure, args.index, texts, args.start)
    for name, row in result.items():
        print(f"{name:>12}: p50 {row['p50_ms']:.2f} ms, p95 {row['p95_ms']:.2f} ms")
    write_results(args, {"index": str(args.index), "rules": result})


if __name__ == "__main__":
    main()
