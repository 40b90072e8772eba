"""Documents ranked by their words on both stores, over one index: a SQLite index made by
`pocketmcp eval --index` is copied into a Postgres schema on a local server (the tests'
embedded one; vectors and text copied, nothing re-embedded, as bench/pg_keywords.py does),
then every query whose relevant documents are all indexed goes through the search op with
one match per document (as `pocketmcp eval` asks) in hybrid and keyword mode on both
stores: nDCG@10 per store, the difference overall and per fold (the 5 folds of
bench/quality_cv.py), and the Postgres keyword stage's time with and without the
whole-document scores (p50/p95, the same queries in one run).

    .venv/bin/python bench/pg_documents.py --source DIR/scifact.db

Results: bench/results/pg_documents.json.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from common import DATASET, ROOT, add_result_args, ms_since, summary, write_results
from pg_keywords import copy_index
from quality_cv import folds_of

sys.path.insert(0, str(ROOT / "tests"))

MODES = ("hybrid", "keyword")


async def run_modes(environ: dict[str, str], queries: dict[str, str],
                    qrels: dict[str, dict[str, int]], timed: int) -> dict[str, Any]:
    """Per mode, per query nDCG@10; and the keyword stage's milliseconds per query without
    and with whole-document scores, over the first `timed` queries."""
    from pocketmcp.config import load
    from pocketmcp.core.metrics import ndcg_at
    from pocketmcp.ops.evaluate import doc_of
    from pocketmcp.plans import READING
    from pocketmcp.runtime import open_runtime
    from pocketmcp.search.run import DEFAULT_PARAMS, search

    out: dict[str, Any] = {}
    async with open_runtime(load({}, environ=environ), READING) as runtime:
        await runtime.started()
        reading = await runtime.reading()
        index = reading.index
        for mode in MODES:
            per: dict[str, float] = {}
            for qid, text in queries.items():
                found = await search(reading, text, top_k=100, mode=mode, unique_docs=True,
                                     fallback=False)
                per[qid] = ndcg_at([doc_of(m.path) for m in found.matches if m.path],
                                   qrels[qid])
            out[mode] = per
        if timed:
            for documents in (False, True):
                times = []
                for text in list(queries.values())[:timed]:
                    def words(reader: Any, t: str = text, d: bool = documents) -> float:
                        started = time.perf_counter()
                        reader.keyword_stage(t, DEFAULT_PARAMS.depth, None,
                                             title_weight=DEFAULT_PARAMS.title_weight,
                                             total=index.live, documents=d)
                        return ms_since(started)
                    times.append(await index.run(words))
                out[f"keyword_stage_documents_{str(documents).lower()}"] = summary(times)
    return out


def indexed_names(index: Path) -> set[str]:
    """The corpus ids of the documents the SQLite index holds."""
    from pocketmcp.core.paths import path_of
    from pocketmcp.ops.evaluate import doc_of
    from pocketmcp.store.sqlite.connect import open_sync_reader

    conn = open_sync_reader(index)
    try:
        return {doc_of(path_of(ext, "file") or ext) for ext, in conn.execute(
            "SELECT external_id FROM documents")}
    finally:
        conn.close()


def main() -> None:
    from support.pg_server import local_postgres

    from pocketmcp.ops.evaluate import load_dataset

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", type=Path, required=True,
                        help="an index `pocketmcp eval --index` made on SQLite")
    parser.add_argument("--dataset", type=Path, default=DATASET)
    parser.add_argument("--timed", type=int, default=150,
                        help="queries whose Postgres keyword stage is timed")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=13)
    add_result_args(parser, "pg_documents")
    args = parser.parse_args()
    if not args.source.is_file():
        parser.error(f"no index at {args.source}: make it with pocketmcp eval --index")
    dataset = load_dataset(args.dataset)
    corpus = Path(str(args.source) + ".corpus")
    indexed = indexed_names(args.source)
    queries = {q: t for q, t in dataset.queries.items()
               if q in dataset.qrels and set(dataset.qrels[q]) <= indexed}
    lite = {"SQLITE_PATH": str(args.source), "WATCH_DIR": str(corpus)}
    sqlite = anyio.run(run_modes, lite, queries, dataset.qrels, 0)
    with tempfile.TemporaryDirectory(prefix="pgd-", dir="/tmp") as tmp, \
            local_postgres(Path(tmp)) as url:
        copy_index(url, "docwords", args.source)
        pg = anyio.run(run_modes, {**lite, "STORE": "postgres", "DATABASE_URL": url,
                                   "PG_SCHEMA": "docwords"}, queries, dataset.qrels, args.timed)
    parts = folds_of(list(queries), args.folds, args.seed)
    result: dict[str, Any] = {"source": str(args.source), "queries": len(queries),
                              "documents": len(indexed), "modes": {}}
    for mode in MODES:
        def mean(scores: dict[str, float], ids: list[str]) -> float:
            return statistics.fmean(scores[q] for q in ids)

        result["modes"][mode] = {
            "sqlite_ndcg@10": round(mean(sqlite[mode], list(queries)), 4),
            "postgres_ndcg@10": round(mean(pg[mode], list(queries)), 4),
            "postgres_minus_sqlite": round(mean(pg[mode], list(queries))
                                           - mean(sqlite[mode], list(queries)), 4),
            "per_fold": [round(mean(pg[mode], p) - mean(sqlite[mode], p), 4) for p in parts]}
        print(mode, result["modes"][mode], flush=True)
    for key in ("keyword_stage_documents_false", "keyword_stage_documents_true"):
        result[key] = pg[key]
        print(key, pg[key], flush=True)
    write_results(args, result)


if __name__ == "__main__":
    main()
