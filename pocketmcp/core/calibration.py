"""What a cosine similarity means for one embedding model (pure functions).

Models place unrelated texts at very different cosines: about 0.03 for the built-in MiniLM,
about 0.76 for multilingual-e5-small, whose cosines crowd between 0.7 and 0.9 for any text.
A raw cosine is therefore no relevance. A model's *background* is the cosine it gives two
unrelated texts: the median over every pair of `PROBES`, short texts on unrelated everyday
topics, each embedded as a query. It depends on the model alone, not on the index (embedded
as queries against an index's chunks, the same probes land within about 0.03 of it for both
models above), and only needs the model's query side, which every search loads anyway.

A cosine is then read as the share of the way from the background to 1, clipped to 0..1: an
unrelated text scores about 0 and an identical one 1, whatever the model.
"""

from __future__ import annotations

from collections.abc import Sequence
from statistics import median

PROBES: tuple[str, ...] = (
    "how long should sourdough bread rise before baking",
    "the home team won the football match in extra time",
    "quarterly revenue of a shoe company fell by ten percent",
    "tomorrow it will rain in the mountains with strong wind",
    "a guitar solo in the middle of the second song",
    "tips for planting tomatoes in a small garden",
    "the cheapest flights from London to Rome in spring",
    "how to remove a red wine stain from a carpet",
    "my cat sleeps on the sofa all afternoon",
    "the painter used bright colours on a large canvas",
    "how to change a flat tyre on a bicycle",
    "swimming lessons for children at the public pool",
    "what to wear to a summer wedding",
    "a hiking trail along the coast with views of the sea",
    "the orchestra played a symphony by Beethoven",
    "how to train a puppy to sit",
)


def background(vectors: Sequence[Sequence[float]]) -> float:
    """The median cosine over every pair of distinct unit vectors (the probes' embeddings)."""
    if len(vectors) < 2:
        raise ValueError("the background needs at least two vectors")
    cosines = [sum(x * y for x, y in zip(a, b, strict=True))
               for i, a in enumerate(vectors) for b in vectors[i + 1:]]
    return float(median(cosines))


def calibrated(cosine: float, background: float) -> float:
    """The cosine as a relevance in 0..1: 0 at the model's background or below, 1 at 1."""
    if background >= 1.0:
        return 1.0 if cosine >= 1.0 else 0.0
    return min(1.0, max(0.0, (cosine - background) / (1.0 - background)))
