"""Fusing ranked lists of ids. Pure functions, table-driven tests in tests/test_fusion.py."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

RRF_K = 60


def rrf(lists: Sequence[Sequence[int]], weights: Sequence[float] | None = None,
        k: int = RRF_K) -> dict[int, float]:
    """Reciprocal rank fusion: sum over lists of weight / (k + rank), ranks from 1."""
    weights = weights or [1.0] * len(lists)
    if len(weights) != len(lists):
        raise ValueError("one weight per list")
    fused: dict[int, float] = {}
    for ranked, weight in zip(lists, weights, strict=True):
        for rank, item in enumerate(ranked, start=1):
            fused[item] = fused.get(item, 0.0) + weight / (k + rank)
    return fused


def minmax(scores: Mapping[int, float]) -> dict[int, float]:
    """Scores scaled to [0, 1] within the list (all 1.0 when they are equal)."""
    if not scores:
        return {}
    low, high = min(scores.values()), max(scores.values())
    if high == low:
        return dict.fromkeys(scores, 1.0)
    return {item: (score - low) / (high - low) for item, score in scores.items()}


def zscore(scores: Mapping[int, float]) -> dict[int, float]:
    """Standard scores within the list, shifted so that the list's minimum is 0."""
    if not scores:
        return {}
    values = list(scores.values())
    mean = sum(values) / len(values)
    spread = (sum((v - mean) ** 2 for v in values) / len(values)) ** 0.5 or 1.0
    low = (min(values) - mean) / spread
    return {item: (score - mean) / spread - low for item, score in scores.items()}


def unscaled(scores: Mapping[int, float]) -> dict[int, float]:
    """Scores as they are (for lists already on a common scale)."""
    return dict(scores)


NORMALISERS = {"minmax": minmax, "zscore": zscore, "none": unscaled}


def convex(lists: Sequence[Mapping[int, float]], weights: Sequence[float],
           normalise: str = "minmax") -> dict[int, float]:
    """Weighted sum of normalised scores (higher is better); absent items add 0."""
    if len(weights) != len(lists):
        raise ValueError("one weight per list")
    scale = NORMALISERS[normalise]
    fused: dict[int, float] = {}
    for scores, weight in zip(lists, weights, strict=True):
        for item, score in scale(scores).items():
            fused[item] = fused.get(item, 0.0) + weight * score
    return fused


def ranked(fused: Mapping[int, float]) -> list[int]:
    """Ids by fused score, best first; ties broken by id for stable results."""
    return sorted(fused, key=lambda item: (-fused[item], item))
