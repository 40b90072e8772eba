"""The Postgres keyword stage's quality on a BEIR data set, beside SQLite's on the same index.

An index `pocketmcp eval --index` made on SQLite is copied into a Postgres schema (its
vectors and text, as bench/pg_scale.py copies: no re-embedding), then every query of the
data set goes through the search op (top_k 100, one match per document, as `pocketmcp eval`
asks) on both stores: vector, keyword and hybrid on SQLite; on Postgres vector once, and
keyword and hybrid for each keyword ranking variant (the all-words factor
`keywords.ALL_WORDS_BOOST` and ts_rank_cd's normalisation). Per query nDCG@10 and
Recall@100, and the keyword stage's chunks found and time. The queries are split into 5
folds as bench/cv_search.py splits them: each variant's mean per fold and the folds on
which it beats the first variant named.

Run with another checkout's Python (its own store code, e.g. the previous commit's) and
`--label` to measure that code on the same schema; `--merge` reads such results beside
these for the folds.

    .venv/bin/python bench/pg_keywords.py --url "$DATABASE_URL" \\
        --source /work/pg-s17k/scifact-cal.db

Results: bench/results/pg_keywords.json.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from pathlib import Path
from typing import Any

import anyio
from common import DATASET, add_result_args, ms_since, summary, write_results

VARIANTS = ("boost1-n32", "boost2-n32", "boost1-n33", "boost2-n33", "boost1.5-n32")


def copy_index(url: str, schema: str, source: Path) -> None:
    """The SQLite index's documents and chunks (with their vectors) into `schema`."""
    import psycopg
    from pg_scale import load, source_rows  # bench/pg_scale.py

    with psycopg.connect(url, autocommit=True) as conn:
        if conn.execute(b"SELECT 1 FROM pg_namespace WHERE nspname = %s",
                        (schema,)).fetchone():
            return
    src, ids, vectors = source_rows(source)
    print(json.dumps(load(url, schema, src, ids, vectors, 1)), flush=True)
    src.close()


def set_variant(name: str) -> None:
    from pocketmcp.store.pg import keywords

    boost, norm = name.split("-")
    keywords.ALL_WORDS_BOOST = float(boost.removeprefix("boost"))
    keywords.NORMALISATION = int(norm.removeprefix("n"))


async def run_modes(environ: dict[str, str], dataset: Any, modes: list[str],
                    variant: str | None) -> dict[str, Any]:
    """Per mode, per query: (nDCG@10, Recall@100), and the keyword stage's figures."""
    from pocketmcp.config import load
    from pocketmcp.core.metrics import ndcg_at, recall_at
    from pocketmcp.ops.evaluate import doc_of
    from pocketmcp.plans import READING
    from pocketmcp.runtime import open_runtime
    from pocketmcp.search.run import DEFAULT_PARAMS, search

    if variant is not None:
        set_variant(variant)
    config = load({}, environ=environ)
    out: dict[str, Any] = {}
    async with open_runtime(config, READING) as runtime:
        await runtime.started()
        reading = await runtime.reading()
        index = reading.index
        for mode in modes:
            per: dict[str, list[float]] = {}
            for qid, text in dataset.queries.items():
                found = await search(reading, text, top_k=100, mode=mode, unique_docs=True,
                                     fallback=False)
                ranked = [doc_of(m.path) for m in found.matches if m.path]
                per[qid] = [ndcg_at(ranked, dataset.qrels[qid]),
                            recall_at(ranked, dataset.qrels[qid])]
            out[mode] = per
        times, counts = [], []
        for text in dataset.queries.values():
            def words(reader: Any, t: str = text) -> tuple[float, int]:
                started = time.perf_counter()
                got = reader.keyword_stage(t, DEFAULT_PARAMS.depth, None,
                                           title_weight=DEFAULT_PARAMS.title_weight,
                                           total=index.live, documents=False)
                return ms_since(started), len(got.keyword)
            ms, n = await index.run(words)
            times.append(ms)
            counts.append(n)
        out["keyword_stage"] = {**summary(times),
                                "chunks_found_mean": round(statistics.fmean(counts), 1)}
    return out


def fold_table(results: dict[str, Any], qids: list[str], folds: int, seed: int
               ) -> dict[str, Any]:
    order = sorted(qids)
    random.Random(seed).shuffle(order)
    parts = [order[i::folds] for i in range(folds)]
    rows: dict[str, Any] = {}
    first: dict[str, list[float]] = {}
    for name, result in results.items():
        for mode, per in result.items():
            if mode == "keyword_stage":
                continue
            fold = [statistics.fmean(per[q][0] for q in p) for p in parts]
            base = first.setdefault(mode, fold)
            rows[f"{name} {mode}"] = {
                "ndcg@10": round(statistics.fmean(per[q][0] for q in order), 4),
                "recall@100": round(statistics.fmean(per[q][1] for q in order), 4),
                "fold_ndcg": [round(f, 4) for f in fold],
                "fold_sd": round(statistics.stdev(fold), 4),
                "folds_beating_first": sum(a > b for a, b in zip(fold, base, strict=True))}
    return rows


def main() -> None:
    from pocketmcp.ops.evaluate import load_dataset

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True, help="a Postgres server's URL")
    parser.add_argument("--schema", default="kwbench")
    parser.add_argument("--source", type=Path, required=True,
                        help="an index `pocketmcp eval --index` made on SQLite")
    parser.add_argument("--dataset", type=Path, default=DATASET)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--label", help="measure this checkout's store as it is, named so "
                                        "(no variants, no SQLite)")
    parser.add_argument("--merge", type=Path, action="append", default=[],
                        help="results of another run (--label) to fold in first")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=13)
    add_result_args(parser, "pg_keywords")
    args = parser.parse_args()
    if not args.source.is_file():
        parser.error(f"no index at {args.source}: make it with pocketmcp eval --index")
    dataset = load_dataset(args.dataset)
    copy_index(args.url, args.schema, args.source)
    pg = {"STORE": "postgres", "DATABASE_URL": args.url, "PG_SCHEMA": args.schema,
          "SQLITE_PATH": str(args.source), "WATCH_DIR": str(args.source) + ".corpus"}
    results: dict[str, Any] = {}
    for other in args.merge:
        results |= json.loads(other.read_text())["results"]
    if args.label:
        results[args.label] = anyio.run(run_modes, pg, dataset, ["keyword", "hybrid"], None)
    else:
        lite = {"SQLITE_PATH": str(args.source), "WATCH_DIR": str(args.source) + ".corpus"}
        results["sqlite"] = anyio.run(run_modes, lite, dataset,
                                      ["vector", "keyword", "hybrid"], None)
        results["postgres-vector"] = anyio.run(run_modes, pg, dataset, ["vector"],
                                               args.variants.split(",")[0])
        for variant in args.variants.split(","):
            results[variant] = anyio.run(run_modes, pg, dataset, ["keyword", "hybrid"],
                                         variant)
            print(variant, json.dumps(results[variant]["keyword_stage"]), flush=True)
    qids = list(dataset.queries)
    table = fold_table(results, qids, args.folds, args.seed)
    for key, row in table.items():
        print(f"{row['ndcg@10']:.4f} ±{row['fold_sd']:.4f} R@100 {row['recall@100']:.4f} "
              f"beats first on {row['folds_beating_first']}/{args.folds}  {key}")
    write_results(args, {
        "dataset": str(args.dataset), "queries": len(qids), "summary": table,
        "keyword_stage": {k: v["keyword_stage"] for k, v in results.items()},
        "results": results})


if __name__ == "__main__":
    main()
