"""Retrieval metrics over ranked document ids. Pure functions."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence


def ndcg_at(ranked: Sequence[str], relevant: Mapping[str, int], k: int = 10) -> float:
    dcg = sum(relevant.get(doc, 0) / math.log2(rank + 2) for rank, doc in enumerate(ranked[:k]))
    ideal = sorted(relevant.values(), reverse=True)[:k]
    idcg = sum(gain / math.log2(rank + 2) for rank, gain in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def recall_at(ranked: Sequence[str], relevant: Mapping[str, int], k: int = 100) -> float:
    return len(set(ranked[:k]) & set(relevant)) / len(relevant) if relevant else 0.0


def mrr_at(ranked: Sequence[str], relevant: Mapping[str, int], k: int = 10) -> float:
    for rank, doc in enumerate(ranked[:k]):
        if doc in relevant:
            return 1.0 / (rank + 1)
    return 0.0


def hit_at(ranked: Sequence[str], relevant: Mapping[str, int], k: int) -> float:
    """1.0 when a relevant document is among the first `k`."""
    return 1.0 if set(ranked[:k]) & set(relevant) else 0.0


def score_run(runs: Mapping[str, Sequence[str]], qrels: Mapping[str, Mapping[str, int]]
              ) -> dict[str, float]:
    """Mean nDCG@10, Recall@100, MRR@10, hit@1 and hit@5 of ranked lists per query id."""
    n = max(1, len(runs))
    return {
        "ndcg@10": sum(ndcg_at(r, qrels[q]) for q, r in runs.items()) / n,
        "recall@100": sum(recall_at(r, qrels[q]) for q, r in runs.items()) / n,
        "mrr@10": sum(mrr_at(r, qrels[q]) for q, r in runs.items()) / n,
        "hit@1": sum(hit_at(r, qrels[q], 1) for q, r in runs.items()) / n,
        "hit@5": sum(hit_at(r, qrels[q], 5) for q, r in runs.items()) / n,
    }
