"""Finding the vector file rows of removed chunks, now that a chunk keeps its id when its
vector comes (ids reach the file out of order when documents waited for their vectors).

Three layouts of a file's ids column of `--rows` rows, documents of `--per-doc` chunks:
- ascending: every chunk got its vector when written (the only layout before);
- keywords first: every document waited, and the vectors came newest document first (the
  embed queue's order), so the ids descend from document to document;
- mixed: half the documents waited (their vectors came after later documents' ids).
For each, the time `rows_of` takes for a commit that removes `--docs` random documents,
and for removals of ids the file does not hold (chunks added and removed past the file's
slot: always the pass over the ids), against the binary search alone (what the ascending
layout needed before), p50 and p95 over `--repeat` draws.

    .venv/bin/python bench/removed_rows.py                    # 1,000,000 rows
    .venv/bin/python bench/removed_rows.py --rows 200000 --repeat 50

Results: bench/results/removed_rows.json.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np
from common import add_result_args, summary, write_results

from pocketmcp.store.sqlite.vectors.file import rows_of


def _layouts(rows: int, per_doc: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    ids = np.arange(1, rows + 1, dtype=np.int64)
    docs = ids.reshape(-1, per_doc)
    waited = rng.random(len(docs)) < 0.5
    mixed = np.concatenate([docs[~waited].ravel(), docs[waited][::-1].ravel()])
    return {"ascending": ids, "keywords_first": docs[::-1].ravel().copy(), "mixed": mixed}


def _time(fn: Callable[[np.ndarray], object], draws: list[np.ndarray]) -> list[float]:
    out = []
    for gone in draws:
        started = time.perf_counter()
        fn(gone)
        out.append((time.perf_counter() - started) * 1000)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--per-doc", type=int, default=5)
    parser.add_argument("--docs", type=int, default=20, help="documents removed a commit")
    parser.add_argument("--repeat", type=int, default=30)
    add_result_args(parser, "removed_rows")
    args = parser.parse_args()
    rows = args.rows - args.rows % args.per_doc
    rng = np.random.default_rng(1)
    results: dict[str, object] = {"rows": rows}
    for name, ids in _layouts(rows, args.per_doc, rng).items():
        draws = []
        for _ in range(args.repeat):
            picked = rng.choice(rows // args.per_doc, args.docs, replace=False)
            draws.append(np.sort((picked[:, None] * args.per_doc + 1
                                  + np.arange(args.per_doc)).ravel()))
        absent = [d + rows for d in draws]  # ids past the file's
        for gone in draws:  # the rows found are the rows that hold them
            assert np.array_equal(np.sort(ids[rows_of(ids, gone)]), gone)
        entry = {"rows_of_ms": summary(_time(lambda g, i=ids: rows_of(i, g), draws)),
                 "absent_ids_ms": summary(_time(lambda g, i=ids: rows_of(i, g), absent))}
        if name == "ascending":
            entry["binary_search_only_ms"] = summary(_time(
                lambda g, i=ids: np.searchsorted(i, g), draws))
        results[name] = entry
        print(name, entry)
    write_results(args, results)


if __name__ == "__main__":
    main()
