"""Ranking candidates, chosen by k-fold cross-validation on one set and checked on another.

For each index (made by `pocketmcp eval ... --index`), every chunk's stored vector, each
query's vector and its keyword lists (the search op's own keyword stage: chunk and
whole-document BM25, depth 200) are read once and cached beside the index (`--cache-dir`).
Each candidate then re-ranks the cached lists in numpy, with one match per document
(`unique_docs`, as `pocketmcp eval` measures); the baseline is the search op's own fusion
(`search.fuse` with the default `Params`), so its figure is the one the eval command
gives, within the float16 rounding of the vector file.

A candidate has a small grid. With `--set` (repeated), each set is cross-validated on its
own: its queries are split into k folds; per fold the grid point best on the other folds is
scored on the held-out fold, against the baseline on that fold (mean gain, spread, folds
won and lost, per set). Without it, the first set (`--index`) is cross-validated and the
grid point best on it is scored on the second (`--check`).

    .venv/bin/pocketmcp eval ../shared/datasets/scifact-train --index DIR/scifact.db
    .venv/bin/pocketmcp eval bench/realdocs --corpus HATCH --index DIR/hatch.db
    .venv/bin/pocketmcp eval bench/realdocs-starlette --corpus STARLETTE --index DIR/starlette.db
    .venv/bin/python bench/quality_cv.py --set scifact DIR/scifact.db \\
        ../shared/datasets/scifact-train --set hatch DIR/hatch.db bench/realdocs \\
        --set starlette DIR/starlette.db bench/realdocs-starlette --cache-dir DIR/cache \\
        --out bench/results/quality_cv_fields.json

Results: bench/results/quality_cv_fields.json (three sets), quality_cv.json (one and a check).

Figures on: docs/search.md (ranking: what was tried).
"""

from __future__ import annotations

import json
import random
import statistics
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import candidates
from common import DATASET, parser_for, write_results
from ranklists import load_set


def folds_of(qids: list[str], k: int, seed: int) -> list[list[str]]:
    order = sorted(qids)
    random.Random(seed).shuffle(order)
    return [order[i::k] for i in range(k)]


def evaluate(name: str, grid: list[dict[str, Any]], first: candidates.Corpus,
             second: candidates.Corpus | None, k: int, seed: int) -> dict[str, Any]:
    """Cross-validated figures of one candidate against the baseline, on `first`; its grid
    point best on the whole of `first` scored on `second`."""
    per_point = {json.dumps(p, sort_keys=True): candidates.run(name, p, first) for p in grid}
    base = candidates.run("baseline", {}, first)
    out = _folds(per_point, base, k, seed)
    if second is not None:
        out["second_set"] = _summary(candidates.run(name, out["chosen"], second),
                                     candidates.run("baseline", {}, second))
    return out


def _folds(per_point: Mapping[str, Mapping[str, tuple[float, float, float]]],
           base: Mapping[str, tuple[float, float, float]], k: int, seed: int
           ) -> dict[str, Any]:
    """Per fold, the grid point best on the other folds scored on it, against the baseline
    (nDCG@10; hit@1 and MRR@10 beside it)."""
    parts = folds_of(list(base), k, seed)

    def mean(scores: Mapping[str, tuple[float, float, float]], ids: list[str],
             i: int = 0) -> float:
        return statistics.fmean(scores[q][i] for q in ids)

    held, held_base, chosen, hits, mrrs = [], [], [], [], []
    for i, part in enumerate(parts):
        train = [q for j, p in enumerate(parts) if j != i for q in p]
        best = max(per_point, key=lambda key: (mean(per_point[key], train), key))
        chosen.append(json.loads(best))
        held.append(mean(per_point[best], part))
        held_base.append(mean(base, part))
        hits.append(mean(per_point[best], part, 2) - mean(base, part, 2))
        mrrs.append(mean(per_point[best], part, 1) - mean(base, part, 1))
    overall = max(per_point, key=lambda key: (mean(per_point[key], list(base)), key))
    gains = [a - b for a, b in zip(held, held_base, strict=True)]
    return {
        "held_out_ndcg": [round(x, 4) for x in held],
        "baseline_ndcg": [round(x, 4) for x in held_base],
        "fold_gains": [round(x, 4) for x in gains],
        "mean_gain": round(statistics.fmean(gains), 4),
        "gain_sd": round(statistics.stdev(gains), 4),
        "folds_won": sum(g > 1e-9 for g in gains),
        "folds_lost": sum(g < -1e-9 for g in gains),
        "hit1_gain": round(statistics.fmean(hits), 4),
        "mrr_gain": round(statistics.fmean(mrrs), 4),
        "chosen_per_fold": chosen, "chosen": json.loads(overall),
        "whole_set": _summary(per_point[overall], base),
    }


def evaluate_sets(name: str, grid: list[dict[str, Any]],
                  sets: Mapping[str, candidates.Corpus], k: int, seed: int
                  ) -> dict[str, Any]:
    """Cross-validated figures of one candidate on each set, folds of its own questions."""
    out = {}
    for set_name, corpus in sets.items():
        per_point = {json.dumps(p, sort_keys=True): candidates.run(name, p, corpus)
                     for p in grid}
        out[set_name] = _folds(per_point, candidates.run("baseline", {}, corpus), k, seed)
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
    parser.add_argument("--index", type=Path)
    parser.add_argument("--dataset", type=Path, default=DATASET)
    parser.add_argument("--check", nargs=2, metavar=("INDEX", "DATASET"),
                        help="the second set: an index of a folder and its questions")
    parser.add_argument("--set", nargs=3, action="append", metavar=("NAME", "INDEX", "DATASET"),
                        help="a set cross-validated on its own (repeat it); a dataset "
                             "without corpus.jsonl is a folder's (corpus ids are paths)")
    parser.add_argument("--cache-dir", type=Path, required=True)
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--only", help="comma-separated candidates")
    parser.add_argument("--folder", action="store_true",
                        help="the first set is a folder's index (corpus ids are paths)")
    parser.add_argument("--common-share", type=float,
                        help="keyword search: drop words in more than this share of the "
                             "chunks (instead of the default); give each its own --cache-dir")
    parser.add_argument("--rule-chunks", type=float,
                        help="the baseline ranks documents by their best chunk for words in "
                             "an index of at least this many chunks a document")
    args = parser.parse_args()
    candidates.RULE_CHUNKS = args.rule_chunks
    if args.common_share is not None:
        from pocketmcp.core import keywords

        assert keywords.query_words.__kwdefaults__ is not None
        keywords.query_words.__kwdefaults__["common"] = args.common_share
    args.cache_dir.mkdir(parents=True, exist_ok=True)
    wanted = args.only.split(",") if args.only else list(candidates.GRIDS)
    if args.set:
        _main_sets(args, wanted)
        return
    first = load_set(args.index, args.dataset, args.cache_dir, args.folder)
    second = (load_set(Path(args.check[0]), Path(args.check[1]), args.cache_dir, True)
              if args.check else None)
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
              f"{row['whole_set']['ndcg@10']:.4f} (base {row['whole_set']['baseline_ndcg@10']:.4f})"
              + (f"; check {check['ndcg@10']:.4f} (base {check['baseline_ndcg@10']:.4f}), "
                 f"MRR {check['mrr@10']:.4f} (base {check['baseline_mrr@10']:.4f})"
                 if check else "") + f"  {json.dumps(row['chosen'])}", flush=True)
    write_results(args, result)


def _main_sets(args: Any, wanted: list[str]) -> None:
    """Every candidate cross-validated on every set given with --set."""
    sets = {name: load_set(Path(index), Path(dataset), args.cache_dir,
                           not (Path(dataset) / "corpus.jsonl").exists())
            for name, index, dataset in args.set}
    result: dict[str, Any] = {
        "sets": {name: {"queries": len(c.qrels), "documents": len(c.names),
                        "chunks": len(c.ids), "chunks_per_document": round(c.chunks_per_doc, 2),
                        "baseline": _summary(candidates.run("baseline", {}, c),
                                             candidates.run("baseline", {}, c))}
                 for name, c in sets.items()},
        "candidates": {}}
    for name in wanted:
        rows = evaluate_sets(name, candidates.GRIDS[name], sets, args.folds, args.seed)
        result["candidates"][name] = rows
        print(f"{name}:", flush=True)
        for set_name, row in rows.items():
            print(f"  {set_name:>10}: gain {row['mean_gain']:+.4f} ±{row['gain_sd']:.4f} "
                  f"(folds {' '.join(f'{g:+.3f}' for g in row['fold_gains'])}), won "
                  f"{row['folds_won']} lost {row['folds_lost']}; hit@1 {row['hit1_gain']:+.3f} "
                  f"MRR {row['mrr_gain']:+.3f}; whole set "
                  f"{row['whole_set']['ndcg@10']:.4f} (base "
                  f"{row['whole_set']['baseline_ndcg@10']:.4f})  {json.dumps(row['chosen'])}",
                  flush=True)
    write_results(args, result)


if __name__ == "__main__":
    main()
