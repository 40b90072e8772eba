"""Where the search tool's default `score_threshold` should sit: the 0..1 scores of the first
match (hybrid, as the tool searches by default: chunks, not one per document) for questions
whose first match is relevant and for those whose first match is not, and how often each
threshold would have removed a relevant first match, over cached candidate lists
(`quality_cv.py` makes them).

    .venv/bin/python bench/threshold.py --set scifact DIR/scifact.db --set hatch DIR/hatch.db

Results: bench/results/threshold.json.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path
from typing import Any

from common import DATASET, ROOT, add_result_args, pct, write_results
from quality_cv import load_set

from pocketmcp.core import fusion
from pocketmcp.search.fuse import DEFAULT_PARAMS, fuse

THRESHOLDS = (0.05, 0.1, 0.15, 0.2, 0.25, 0.3)


def first_scores(corpus: Any) -> tuple[list[float], list[float], list[float]]:
    """Scores of relevant first matches, of irrelevant first matches, and of every
    irrelevant match in the first ten."""
    good, bad, noise = [], [], []
    for qid in corpus.queries:
        stage = corpus.stage(qid, corpus.nearest(corpus.qvec[qid]))
        scores = fuse(stage, "hybrid", DEFAULT_PARAMS, False)
        top = fusion.ranked(scores)[:10]
        rel = corpus.qrels[qid]
        for i, chunk in enumerate(top):
            hit = corpus.names[stage.doc_of[chunk]] in rel
            if i == 0:
                (good if hit else bad).append(scores[chunk])
            if not hit:
                noise.append(scores[chunk])
    return good, bad, noise


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--set", nargs=2, action="append", metavar=("NAME", "INDEX"),
                        required=True)
    parser.add_argument("--cache-dir", type=Path, required=True)
    add_result_args(parser, "threshold")
    args = parser.parse_args()
    out: dict[str, Any] = {}
    for name, index in args.set:
        folder = name != "scifact"
        dataset = ROOT / "bench" / "realdocs" if folder else DATASET
        corpus = load_set(Path(index), dataset, args.cache_dir, folder)
        good, bad, noise = first_scores(corpus)
        row: dict[str, Any] = {
            "queries": len(corpus.queries),
            "relevant_first": {"n": len(good), "p5": round(pct(good, 0.05), 3),
                               "p10": round(pct(good, 0.10), 3),
                               "median": round(statistics.median(good), 3)},
            "irrelevant_first": {"n": len(bad), "median": round(statistics.median(bad), 3)},
            "irrelevant_in_top10": {"n": len(noise),
                                    "median": round(statistics.median(noise), 3)},
            "by_threshold": {}}
        for t in THRESHOLDS:
            row["by_threshold"][str(t)] = {
                "relevant_first_removed": round(sum(s < t for s in good) / len(good), 4),
                "irrelevant_removed": round(sum(s < t for s in noise) / len(noise), 4)}
        out[name] = row
        print(name, row)
    write_results(args, out)


if __name__ == "__main__":
    main()
