"""What the postings budget of the keyword stage costs in time and keeps of BM25's best.

For each SciFact query (the bench queries of `bench/search.py`'s cache), the words the search
op would send are chosen with no budget (only the common-word rules; the "full" query) and
with each budget asked for, and the best `--depth` chunks of each are fetched with the
search op's own SQL (`SqliteReader.search_keyword`). A budgeted query's chunks are then scored
by the full query's BM25 (the same FTS5 function, restricted to those rows), and a chunk
counts as kept when it scores at least the full query's 10th (or `--depth`th) best: ties
count, which matters on the synthetic indexes, where each real text is in many chunks.

Reports per budget: p50/p95 of the budgeted query, the share of the full top 10 (top
`--depth`) kept, in how many queries all of the top 10 was kept, and the postings scored.

    .venv/bin/python bench/keyword_budget.py --index ../benchdata/search-1000000.db \\
        --budgets 30000,20000,15000,10000
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / ".cache" / "bench-base-1500.npz"
FULL = 10 ** 12  # no budget


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def full_scores(reader: Any, match: str, ids: list[int]) -> dict[int, float]:
    """The full query's BM25 of these chunks (as search_keyword scores them)."""
    return {int(a): float(b) for a, b in reader.query(
        "SELECT rowid, -bm25(chunks_fts, 1.0, 1.0) FROM chunks_fts WHERE chunks_fts MATCH ? "
        "AND rowid IN (SELECT value FROM json_each(?))", (match, json.dumps(ids)))}


def measure(db: Path, queries: int, budgets: list[int], depth: int) -> dict[str, Any]:
    from pocketmcp.core.keywords import match_of, query_words, terms, vocab_terms
    from pocketmcp.store.sqlite.queries import SqliteReader

    texts = [str(t) for t in np.load(CACHE)["query_texts"]][:queries]
    reader = SqliteReader(db)
    total = reader.fts_rows() or 0
    rows: dict[int, dict[str, list[float]]] = {
        b: {"ms": [], "top10": [], "top": [], "postings": []} for b in budgets}
    load = [os.getloadavg()[0]]
    for text in texts:
        df = reader.term_docs(vocab_terms(terms(text)))
        full = query_words(text, df, total, budget=FULL)
        if not full:
            continue
        full_match = match_of(full)
        ref = reader.search_keyword(full_match, depth)
        if len(ref) < depth:
            continue
        at10, at_depth = ref[9][1] - 1e-9, ref[-1][1] - 1e-9
        for budget in budgets:
            kept = query_words(text, df, total, budget=budget)
            started = time.perf_counter_ns()
            ids = [h[0] for h in reader.search_keyword(match_of(kept), depth)]
            ms = (time.perf_counter_ns() - started) / 1e6
            scores = full_scores(reader, full_match, ids)
            row = rows[budget]
            row["ms"].append(ms)
            row["postings"].append(sum(n for _, n in kept))
            row["top10"].append(sum(scores.get(c, 0.0) >= at10 for c in ids[:10]) / 10)
            row["top"].append(sum(scores.get(c, 0.0) >= at_depth for c in ids) / depth)
        load.append(os.getloadavg()[0])
    reader.close()
    return {
        "index": str(db), "chunks": total, "queries": len(rows[budgets[0]]["ms"]),
        "depth": depth, "cpus": os.cpu_count(),
        "load_1min": [round(min(load), 2), round(max(load), 2)],
        "budgets": {str(b): {
            "p50_ms": round(statistics.median(r["ms"]), 2),
            "p95_ms": round(pct(r["ms"], 0.95), 2),
            "top10_kept": round(statistics.mean(r["top10"]), 4),
            "queries_top10_all_kept": sum(x == 1.0 for x in r["top10"]),
            f"top{depth}_kept": round(statistics.mean(r["top"]), 4),
            "postings_p50": statistics.median(r["postings"]),
        } for b, r in rows.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--index", type=Path, required=True)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--budgets", default="30000,20000,15000,10000")
    parser.add_argument("--depth", type=int, default=100)
    parser.add_argument("--out", type=Path, help="write the results (JSON) here")
    args = parser.parse_args()
    budgets = [int(b) for b in args.budgets.split(",")]
    result = measure(args.index.resolve(), args.queries, budgets, args.depth)
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
