"""The keyword stage's SQL at scale: the current form against FTS5's other ways to ask.

On an index kept by `bench/search.py --keep`, each SciFact query is turned into the MATCH
expression the search op sends (its rarest words, `core.keywords`), and the best `--depth`
chunks with their documents are asked for in each form, the forms alternating query by
query so that all see the same machine load:

- current: `bm25()` ranked with LIMIT inside a CTE over chunks_fts alone, then joined to
  chunks by rowid (what `store/sqlite/queries.py` does);
- rank: the same through FTS5's `rank` column (`rank MATCH 'bm25(w, 1.0)' ORDER BY rank`);
- joined: chunks joined before ranking (no CTE; the join runs for every matching row).

Column weights are the same in all (title/section `--title-weight`, text 1.0). Reports
p50/p95 per form and whether every form returned the same chunks with the same scores.

    .venv/bin/python bench/fts_options.py --index ../benchdata/search-1000000.db
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATASET = ROOT.parent / "shared" / "datasets" / "scifact-train"

Rows = list[tuple[int, float, int]]

FORMS = {
    "current": (
        "WITH top AS (SELECT f.rowid AS chunk_id, -bm25(chunks_fts, ?, 1.0) AS score "
        "FROM chunks_fts f WHERE chunks_fts MATCH ? ORDER BY score DESC LIMIT ?) "
        "SELECT top.chunk_id, top.score, c.doc_id FROM top "
        "JOIN chunks c ON c.chunk_id = top.chunk_id ORDER BY top.score DESC"),
    "rank": (
        "WITH top AS (SELECT f.rowid AS chunk_id, -rank AS score FROM chunks_fts f "
        "WHERE chunks_fts MATCH ? AND rank MATCH ? ORDER BY rank LIMIT ?) "
        "SELECT top.chunk_id, top.score, c.doc_id FROM top "
        "JOIN chunks c ON c.chunk_id = top.chunk_id ORDER BY top.score DESC"),
    "joined": (
        "SELECT f.rowid, -bm25(chunks_fts, ?, 1.0) AS score, c.doc_id FROM chunks_fts f "
        "JOIN chunks c ON c.chunk_id = f.rowid WHERE chunks_fts MATCH ? "
        "ORDER BY score DESC LIMIT ?"),
}


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def matches(conn: Any, texts: list[str]) -> list[str]:
    from pocketmcp.core.keywords import match_of, query_words, terms, vocab_terms

    total = conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
    out = []
    for text in texts:
        words = terms(text)
        if not words:
            continue
        df = {}
        for term in dict.fromkeys(vocab_terms(words)):
            row = conn.execute("SELECT doc FROM chunks_vocab WHERE term = ?", (term,)).fetchone()
            if row and row[0] is not None:
                df[term] = int(row[0])
        kept = query_words(text, df, total)
        if kept:
            out.append(match_of(kept))
    return out


def runner(conn: Any, form: str, weight: float, depth: int) -> Callable[[str], Rows]:
    sql = FORMS[form]

    def run(match: str) -> Rows:
        args: tuple[Any, ...]
        if form == "rank":
            args = (match, f"bm25({weight!r}, 1.0)", depth)
        else:
            args = (weight, match, depth)
        return [(int(a), float(b), int(c)) for a, b, c in conn.execute(sql, args)]

    return run


def main() -> None:
    from pocketmcp.store.sqlite.connect import open_sync_reader

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--index", type=Path, required=True)
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--depth", type=int, default=200)
    parser.add_argument("--title-weight", type=float, default=1.0)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" /
                        "fts_options.json")
    args = parser.parse_args()
    with open(DATASET / "queries.jsonl", encoding="utf-8") as handle:
        texts = [json.loads(line)["text"] for line in handle][:args.queries]
    conn = open_sync_reader(args.index)
    exprs = matches(conn, texts)
    runs = {form: runner(conn, form, args.title_weight, args.depth) for form in FORMS}
    times: dict[str, list[float]] = {form: [] for form in FORMS}
    same = {form: 0 for form in FORMS}
    for expr in exprs:  # warm the page cache once
        for run in runs.values():
            run(expr)
    for _ in range(args.rounds):
        for expr in exprs:
            results = {}
            for form, run in runs.items():
                started = time.perf_counter()
                results[form] = run(expr)
                times[form].append((time.perf_counter() - started) * 1000)
            base = results["current"]
            for form, rows in results.items():
                same[form] += int([r[0] for r in rows] == [r[0] for r in base] and all(
                    abs(a[1] - b[1]) < 1e-9 for a, b in zip(rows, base, strict=True)))
    report = {"index": str(args.index), "queries": len(exprs), "rounds": args.rounds,
              "depth": args.depth, "cpus": os.cpu_count(), "load": os.getloadavg(),
              "forms": {form: {"p50_ms": round(statistics.median(t), 2),
                               "p95_ms": round(pct(t, 0.95), 2),
                               "same_results": f"{same[form]}/{len(t)}"}
                        for form, t in times.items()}}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report["forms"], indent=2))


if __name__ == "__main__":
    main()
