"""Ranking candidates, chosen by k-fold cross-validation on one set and checked on another.

For each index (made by `pocketmcp eval ... --index`), every chunk's stored vector, each
query's vector and its keyword lists (the search op's own keyword stage: chunk and
whole-document BM25, depth 200) are read once and cached beside the index (`--cache-dir`).
Each candidate then re-ranks the cached lists in numpy, with one match per document
(`unique_docs`, as `pocketmcp eval` measures); the baseline is the search op's own fusion
(`search.fuse` with the default `Params`), so its figure is the one the eval command
gives, within the float16 rounding of the vector file.

A candidate has a small grid. On the first set (`--index`, SciFact's training split) the
queries are split into k folds; per fold the grid point best on the other folds is scored on
the held-out fold, against the baseline on that fold. The candidate's grid point best on
the whole first set is then scored on the second set (`--check`, the Hatch documentation).

    .venv/bin/pocketmcp eval ../shared/datasets/scifact-train --index DIR/scifact.db
    .venv/bin/pocketmcp eval bench/realdocs --corpus HATCH --index DIR/hatch.db
    .venv/bin/python bench/quality_cv.py --index DIR/scifact.db \\
        --check DIR/hatch.db bench/realdocs

Results: bench/results/quality_cv.json.

Figures on: docs/search.md (ranking: what was tried).
"""

from __future__ import annotations

import json
import random
import statistics
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import anyio
import candidates
import data
import msgspec
import numpy as np
from common import DATASET, parser_for, write_results

DEPTH = 200


class Cache(msgspec.Struct):
    names: dict[int, str]  # doc_id -> corpus id
    chunk_ids: list[int]
    chunk_docs: list[int]
    background: float
    queries: dict[str, Any]  # qid -> {"text", "keyword", "doc_keyword", "first_chunk", "ref"}


def _chunk_ids(index: Path) -> list[int]:
    """Every chunk id of the SQLite index at `index`, ascending (ids only grow, with gaps
    where chunks were replaced: read, not guessed)."""
    from pocketmcp.store.sqlite.connect import open_sync_reader

    conn = open_sync_reader(index)
    try:
        return [row[0] for row in conn.execute("SELECT chunk_id FROM chunks ORDER BY chunk_id")]
    finally:
        conn.close()


async def _gather(index: Path, dataset: Any, name_of: Callable[[str], str]
                  ) -> tuple[Cache, np.ndarray, np.ndarray]:
    from pocketmcp.core.paths import path_of
    from pocketmcp.embed.background import model_background
    from pocketmcp.search.retrieve import retrieve

    async with data.reading(index) as reading:
        index_ = reading.index
        ids = await index_.run(lambda r: r.all_external_ids())
        names = {d: name_of(path_of(ext, "file") or ext) for d, ext in ids}
        every = await anyio.to_thread.run_sync(_chunk_ids, index)
        chunk_ids, chunk_docs, vectors = await index_.run(
            lambda r: r.vectors_by_ids(every, index_.dim))
        background = await model_background(reading.embedder)
        queries: dict[str, Any] = {}
        qvecs = []
        for n, (qid, text) in enumerate(dataset.queries.items()):
            stage = (await retrieve(reading, text, mode="keyword", depth=DEPTH,
                                    unique_docs=True)).stage
            queries[qid] = {"text": text, "keyword": stage.keyword, "doc_of": stage.doc_of,
                            "doc_keyword": stage.doc_keyword,
                            "first_chunk": stage.first_chunk, "ref": stage.keyword_ref}
            qvecs.append(await reading.embedder.embed_query(text))
            if n % 200 == 0:
                print(f"gathered {n}/{len(dataset.queries)}", file=sys.stderr, flush=True)
    cache = Cache(names, chunk_ids.tolist(), chunk_docs.tolist(), background, queries)
    return cache, np.asarray(vectors, dtype=np.float32), np.stack(qvecs).astype(np.float32)


def load_set(index: Path, dataset_dir: Path, cache_dir: Path, folder_names: bool
             ) -> candidates.Corpus:
    """The set's cached lists (read from `index` the first time)."""
    from pocketmcp.ops.evaluate import doc_of, load_dataset

    dataset = load_dataset(dataset_dir, corpus=not folder_names)
    base = cache_dir / index.name
    meta, arrays = base.with_suffix(".qcache"), base.with_suffix(".qcache.npz")
    if meta.exists() and arrays.exists():
        cache = msgspec.msgpack.decode(meta.read_bytes(), type=Cache)
        found = np.load(arrays)
        vectors, qvecs = found["vectors"], found["queries"]
    else:
        cache, vectors, qvecs = anyio.run(_gather, index, dataset,
                                          str if folder_names else doc_of)
        meta.write_bytes(msgspec.msgpack.encode(cache))
        np.savez(arrays, vectors=vectors, queries=qvecs)
    return candidates.Corpus.make(cache, vectors, qvecs, dataset.qrels)


def folds_of(qids: list[str], k: int, seed: int) -> list[list[str]]:
    order = sorted(qids)
    random.Random(seed).shuffle(order)
    return [order[i::k] for i in range(k)]


def evaluate(name: str, grid: list[dict[str, Any]], first: candidates.Corpus,
             second: candidates.Corpus | None, k: int, seed: int) -> dict[str, Any]:
    """Cross-validated figures of one candidate against the baseline."""
    per_point = {json.dumps(p, sort_keys=True): candidates.run(name, p, first) for p in grid}
    base = candidates.run("baseline", {}, first)
    parts = folds_of(list(base), k, seed)

    def mean(scores: Mapping[str, tuple[float, float, float]], ids: list[str],
             i: int = 0) -> float:
        return statistics.fmean(scores[q][i] for q in ids)

    held, held_base, chosen = [], [], []
    for i, part in enumerate(parts):
        train = [q for j, p in enumerate(parts) if j != i for q in p]
        best = max(per_point, key=lambda key: (mean(per_point[key], train), key))
        chosen.append(json.loads(best))
        held.append(mean(per_point[best], part))
        held_base.append(mean(base, part))
    overall = max(per_point, key=lambda key: (mean(per_point[key], list(base)), key))
    out: dict[str, Any] = {
        "held_out_ndcg": [round(x, 4) for x in held],
        "baseline_ndcg": [round(x, 4) for x in held_base],
        "mean_gain": round(statistics.fmean(a - b for a, b in zip(held, held_base,
                                                                   strict=True)), 4),
        "gain_sd": round(statistics.stdev(a - b for a, b in zip(held, held_base,
                                                                 strict=True)), 4),
        "folds_won": sum(a > b for a, b in zip(held, held_base, strict=True)),
        "chosen_per_fold": chosen, "chosen": json.loads(overall),
        "first_set": _summary(per_point[overall], base),
    }
    if second is not None:
        out["second_set"] = _summary(candidates.run(name, json.loads(overall), second),
                                     candidates.run("baseline", {}, second))
    return out


def _summary(scores: Mapping[str, tuple[float, float, float]],
             base: Mapping[str, tuple[float, float, float]]) -> dict[str, float]:
    ids = list(base)
    return {"ndcg@10": round(statistics.fmean(scores[q][0] for q in ids), 4),
            "mrr@10": round(statistics.fmean(scores[q][1] for q in ids), 4),
            "hit@1": round(statistics.fmean(scores[q][2] for q in ids), 4),
            "baseline_ndcg@10": round(statistics.fmean(base[q][0] for q in ids), 4),
            "baseline_mrr@10": round(statistics.fmean(base[q][1] for q in ids), 4),
            "baseline_hit@1": round(statistics.fmean(base[q][2] for q in ids), 4)}


def main() -> None:
    parser = parser_for(__doc__, "quality_cv")
    parser.add_argument("--index", type=Path, required=True)
    parser.add_argument("--dataset", type=Path, default=DATASET)
    parser.add_argument("--check", nargs=2, metavar=("INDEX", "DATASET"),
                        help="the second set: an index of a folder and its questions")
    parser.add_argument("--cache-dir", type=Path, required=True)
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--only", help="comma-separated candidates")
    parser.add_argument("--folder", action="store_true",
                        help="the first set is a folder's index (corpus ids are paths)")
    parser.add_argument("--common-share", type=float,
                        help="keyword search: drop words in more than this share of the "
                             "chunks (instead of the default); give each its own --cache-dir")
    args = parser.parse_args()
    if args.common_share is not None:
        from pocketmcp.core import keywords

        assert keywords.query_words.__kwdefaults__ is not None
        keywords.query_words.__kwdefaults__["common"] = args.common_share
    args.cache_dir.mkdir(parents=True, exist_ok=True)
    first = load_set(args.index, args.dataset, args.cache_dir, args.folder)
    second = (load_set(Path(args.check[0]), Path(args.check[1]), args.cache_dir, True)
              if args.check else None)
    wanted = args.only.split(",") if args.only else list(candidates.GRIDS)
    result: dict[str, Any] = {"queries": len(first.qrels), "documents": len(first.names),
                              "common_share": args.common_share, "candidates": {},
                              "baseline_per_query": {
                                  "first": candidates.run("baseline", {}, first),
                                  "second": candidates.run("baseline", {}, second)
                                  if second is not None else {}}}
    for name in wanted:
        row = evaluate(name, candidates.GRIDS[name], first, second, args.folds, args.seed)
        result["candidates"][name] = row
        check = row.get("second_set", {})
        print(f"{name:>14}: gain {row['mean_gain']:+.4f} ±{row['gain_sd']:.4f}, "
              f"won {row['folds_won']}/{args.folds} folds; first set "
              f"{row['first_set']['ndcg@10']:.4f} (base {row['first_set']['baseline_ndcg@10']:.4f})"
              + (f"; check {check['ndcg@10']:.4f} (base {check['baseline_ndcg@10']:.4f}), "
                 f"MRR {check['mrr@10']:.4f} (base {check['baseline_mrr@10']:.4f})"
                 if check else "") + f"  {json.dumps(row['chosen'])}", flush=True)
    write_results(args, result)


if __name__ == "__main__":
    main()
