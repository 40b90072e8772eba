"""Chunks that wait for their vectors, as a search sees them.

Documents are written for keyword search as soon as they are chunked, and get their vectors
later (pipeline/embedder.py). Until then their chunks are in no vector list: a hybrid search
ranks such a chunk by its keywords alone, at their full weight (fused with the vector list,
it would count as no match by meaning), so the two kinds of chunk make one list; and the
result's `notice` says how many chunks still wait.
"""

from __future__ import annotations

from collections.abc import Sequence

from pocketmcp.ops.ranking import Mode, Params, Stage
from pocketmcp.store.api import Waiting


def waiting_of(chunk_ids: Sequence[int], reader: Waiting) -> tuple[int, set[int]]:
    """How many chunks of the index wait for vectors, and which of `chunk_ids` do
    (blocking; one indexed count when none wait)."""
    count = reader.waiting_count()
    return count, (reader.waiting_among(chunk_ids) if count and chunk_ids else set())


def keywords_alone(stage: Stage, scores: dict[int, float], waiting: set[int],
                   params: Params) -> None:
    """Give the fused score of each waiting chunk whose document has no vector match its
    keywords' full weight (in place)."""
    share = 1.0 - params.vector_weight
    if not waiting or not 0.0 < share < 1.0:
        return
    by_meaning = {stage.doc_of[c] for c in stage.vector}
    for chunk_id in scores:
        if chunk_id in waiting and stage.doc_of.get(chunk_id) not in by_meaning:
            scores[chunk_id] /= share


def pending_notice(count: int, mode: Mode) -> str | None:
    """What a search says when chunks wait for their vectors (None when none do)."""
    if not count:
        return None
    where = ("they are found by their keywords until then" if mode == "hybrid"
             else "vector results leave them out until then")
    return f"{count} chunks still wait for their vectors: {where}"
