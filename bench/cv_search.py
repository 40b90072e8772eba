"""k-fold cross-validation of the hybrid search's tuning on a BEIR data set.

Each query's candidate lists are gathered once through the search op's own retrievers
(`search.retrieve`: the vector list, and per title weight the chunk and whole-document BM25
lists) at the largest depth of the grid, and cached. Every setting then re-ranks the cached
lists with the search's own fusion (`search.fuse`); a smaller depth takes the heads of the
lists, which is what a search of that depth finds. So every figure is the one `search` gives
with top_k 10 and `unique_docs` (a document ranks at its best chunk).

The queries are split into k folds (fixed seed). For each fold the setting with the best mean
nDCG@10 on the other folds is chosen and scored on the held-out fold: the mean and spread of
those held-out scores measure the selection procedure itself. Every setting is also reported
with its mean and spread over the folds, and the folds on which it beats the current default.

    .venv/bin/pocketmcp eval ../shared/datasets/scifact-train --index /tmp/scifact.db
    .venv/bin/python bench/cv_search.py --index /tmp/scifact.db

Results: bench/results/cv_search.json.

Figures on: docs/search-scores.md; docs/search.md; docs/postgres.md.
"""

from __future__ import annotations

import itertools
import json
import random
import statistics
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import data
import msgspec
from common import DATASET, parser_for, write_results

TITLE_WEIGHTS = (0.5, 1.0, 2.0)
DEPTHS = (50, 100, 200)
WEIGHTS = (0.3, 0.4, 0.5, 0.6, 0.7)
NORMALISERS = ("zscore", "minmax", "relevance")


class Cached(msgspec.Struct):
    vector: Any  # fuse.Stage of the vector list
    words: dict[str, Any]  # title weight -> fuse.Stage of the keyword lists


def grid() -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = [
        {"fusion": "convex", "normalise": n, "vector_weight": w, "title_weight": t, "depth": d}
        for n, w, t, d in itertools.product(NORMALISERS, WEIGHTS, TITLE_WEIGHTS, DEPTHS)]
    # Relevance scaling with the raw cosines, as before the per-model calibration.
    rows += [{"fusion": "convex", "normalise": "relevance", "vector_weight": w,
              "title_weight": t, "depth": d, "calibrated": False}
             for w, t, d in itertools.product(WEIGHTS, TITLE_WEIGHTS, DEPTHS)]
    rows += [{"fusion": "rrf", "vector_weight": w, "title_weight": t, "depth": 100}
             for w, t in itertools.product(WEIGHTS, TITLE_WEIGHTS)]
    rows += [{"fusion": "convex", "normalise": "zscore", "vector_weight": 0.6,
              "title_weight": 1.0, "depth": 100, "document_keywords": False}]
    return rows


def key_of(setting: Mapping[str, Any]) -> str:
    return json.dumps(setting, sort_keys=True)


async def gather_all(index: Path, dataset: Any, depth: int) -> dict[str, Any]:
    from pocketmcp.core.paths import path_of
    from pocketmcp.ops.evaluate import doc_of
    from pocketmcp.search.fuse import Params
    from pocketmcp.search.retrieve import retrieve

    out: dict[str, Any] = {"queries": {}, "names": {}}
    async with data.reading(index) as reading:
        ids = await reading.index.run(lambda r: r.all_external_ids())
        out["names"] = {str(d): doc_of(path_of(ext, "file") or ext) for d, ext in ids}
        indexed = set(out["names"].values())
        for n, (qid, text) in enumerate(dataset.queries.items()):
            if not set(dataset.qrels[qid]) <= indexed:
                continue
            vec = (await retrieve(reading, text, mode="vector", depth=depth)).stage
            words = {}
            for tw in TITLE_WEIGHTS:
                words[str(tw)] = (await retrieve(reading, text, mode="keyword", depth=depth,
                                                 params=Params(title_weight=tw),
                                                 unique_docs=True)).stage
            out["queries"][qid] = Cached(vec, words)
            if n % 100 == 0:
                print(f"gathered {n}/{len(dataset.queries)}", flush=True)
    return out


def score_setting(setting: Mapping[str, Any], cache: Mapping[str, Any],
                  qrels: Mapping[str, Mapping[str, int]]) -> dict[str, tuple[float, float]]:
    """(nDCG@10, MRR@10) per query."""
    from pocketmcp.core import fusion
    from pocketmcp.core.metrics import mrr_at, ndcg_at
    from pocketmcp.search.fuse import Params, Stage, fuse, truncated

    fields = {k: v for k, v in setting.items() if k != "depth"}
    params = msgspec.convert(fields, Params)
    names = cache["names"]
    out = {}
    for qid, cached in cache["queries"].items():
        vec, words = cached.vector, cached.words[str(params.title_weight)]
        stage = Stage(vector=vec.vector, keyword=words.keyword,
                      doc_of={**vec.doc_of, **words.doc_of},
                      doc_keyword=words.doc_keyword if params.document_keywords else {},
                      first_chunk=words.first_chunk if params.document_keywords else {},
                      keyword_ref=words.keyword_ref,
                      vector_background=vec.vector_background)
        stage = truncated(stage, setting["depth"])
        scores = fuse(stage, "hybrid", params, True)
        ranked: list[str] = []
        for chunk_id in fusion.ranked(scores):
            name = names[str(stage.doc_of[chunk_id])]
            if name not in ranked:
                ranked.append(name)
            if len(ranked) == 10:
                break
        out[qid] = (ndcg_at(ranked, qrels[qid]), mrr_at(ranked, qrels[qid]))
    return out


def cross_validate(per_setting: Mapping[str, Mapping[str, tuple[float, float]]],
                   qids: list[str], folds: int, seed: int, default: str) -> dict[str, Any]:
    order = sorted(qids)
    random.Random(seed).shuffle(order)
    parts = [order[i::folds] for i in range(folds)]

    def mean(key: str, ids: list[str]) -> float:
        return statistics.fmean(per_setting[key][q][0] for q in ids)

    settings: dict[str, Any] = {}
    for key in per_setting:
        fold_means = [mean(key, p) for p in parts]
        settings[key] = {
            "ndcg@10": mean(key, order),
            "mrr@10": statistics.fmean(per_setting[key][q][1] for q in order),
            "fold_ndcg": fold_means, "fold_sd": statistics.stdev(fold_means),
            "folds_beating_default": sum(
                a > b for a, b in zip(fold_means, [mean(default, p) for p in parts],
                                      strict=True)),
        }
    chosen = []
    for i, held in enumerate(parts):
        train = [q for j, p in enumerate(parts) if j != i for q in p]
        best = max(per_setting, key=lambda k: (mean(k, train), k))
        chosen.append({"fold": i, "chosen": json.loads(best), "train": mean(best, train),
                       "held_out": mean(best, held), "default_held_out": mean(default, held)})
    held = [c["held_out"] for c in chosen]
    return {"folds": folds, "seed": seed, "queries": len(order),
            "procedure": {"mean": statistics.fmean(held), "sd": statistics.stdev(held),
                          "min": min(held), "max": max(held), "per_fold": chosen},
            "settings": settings}


def main() -> None:
    from pocketmcp.ops.evaluate import load_dataset

    parser = parser_for(__doc__, "cv_search")
    parser.add_argument("--index", type=Path, required=True)
    parser.add_argument("--dataset", type=Path, default=DATASET)
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--cache", type=Path, help="candidate lists (made when missing)")
    args = parser.parse_args()
    if not args.index.is_file():  # opening it would make an empty index, and measure that
        parser.error(f"no index at {args.index}: make it with pocketmcp eval --index")
    dataset = load_dataset(args.dataset)
    cache_file = args.cache or args.index.with_name(args.index.name + ".cv-cache")
    if cache_file.exists():
        from pocketmcp.search.fuse import Stage

        raw = msgspec.msgpack.decode(cache_file.read_bytes())
        cache = {"names": raw["names"], "queries": {
            q: Cached(msgspec.convert(c["vector"], Stage, strict=False),
                      {t: msgspec.convert(s, Stage, strict=False)
                       for t, s in c["words"].items()})
            for q, c in raw["queries"].items()}}
    else:
        cache = anyio.run(gather_all, args.index, dataset, max(DEPTHS))
        cache_file.write_bytes(msgspec.msgpack.encode(cache))
    # The previous default: relevance scaling of the raw cosines.
    default = key_of({"fusion": "convex", "normalise": "relevance", "vector_weight": 0.5,
                      "title_weight": 1.0, "depth": 200, "calibrated": False})
    # An index of part of the corpus: only the queries whose relevant documents are all in it.
    indexed = set(cache["names"].values())
    qids = [q for q in dataset.queries if set(dataset.qrels[q]) <= indexed
            and q in cache["queries"]]
    cache["queries"] = {q: cache["queries"][q] for q in qids}
    print(f"{len(indexed)} documents indexed; {len(qids)} of {len(dataset.queries)} "
          "queries have all their relevant documents among them")
    per_setting = {}
    for setting in grid():
        per_setting[key_of(setting)] = score_setting(setting, cache, dataset.qrels)
    result = cross_validate(per_setting, qids, args.folds, args.seed, default)
    result["documents"] = len(indexed)
    result["default"] = json.loads(default)
    write_results(args, result)
    top = sorted(result["settings"].items(), key=lambda kv: -kv[1]["ndcg@10"])
    for key, row in [*top[:15], (default, result["settings"][default])]:
        print(f"{row['ndcg@10']:.4f} ±{row['fold_sd']:.4f} "
              f"beats default on {row['folds_beating_default']}/{args.folds} folds  {key}")
    proc = result["procedure"]
    print(f"selection procedure, held-out nDCG@10: {proc['mean']:.4f} "
          f"±{proc['sd']:.4f} (min {proc['min']:.4f}, max {proc['max']:.4f})")
    for c in proc["per_fold"]:
        print(f"  fold {c['fold']}: held-out {c['held_out']:.4f} "
              f"(default {c['default_held_out']:.4f}) with {json.dumps(c['chosen'])}")


if __name__ == "__main__":
    main()
