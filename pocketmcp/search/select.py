"""The select step: which of the ranked chunks a search answers with (pure functions).

The chunks come best first with the score they show. A chunk whose row is gone (removed by a
commit since the lists were made) is skipped; one under `score_threshold` is removed (and
counted, `floor`); at most `per_doc` come from one document, and a chunk next to a better one
of its document is merged into it as one passage (not with `per_doc` 0). When the threshold
removes every chunk, the best few are kept anyway unless the threshold is strict.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from pocketmcp.search.floor import FLOOR_KEEP, Removed, kept_anyway
from pocketmcp.store.rows import HitRow


@dataclass(frozen=True)
class Selection:
    """(chunk id, score) pairs kept, best first; the passages merged into them (chunk id ->
    first and last chunk position); what the threshold removed; and whether every chunk
    was under it (the best kept anyway)."""

    kept: list[tuple[int, float]]
    merged: dict[int, tuple[int, int]]
    removed: Removed
    floored: bool


def select(scored: Iterable[tuple[int, float]], rows: Mapping[int, HitRow],
           doc_of: dict[int, int], *, top_k: int, threshold: float | None, per_doc: int,
           strict: bool) -> Selection:
    """At most `top_k` of the `scored` chunks that have `rows`, as the module says."""
    removed = Removed(threshold or 0.0)
    kept: list[tuple[int, float]] = []
    spans: dict[int, list[list[int]]] = {}  # doc -> [first, last, place in kept]
    for chunk_id, score in scored:
        if chunk_id not in rows:
            continue
        if threshold is not None and score < threshold:
            removed.add(chunk_id, score)
            continue
        if per_doc:
            row = rows[chunk_id]
            doc_spans = spans.setdefault(row.doc_id, [])
            near = next((sp for sp in doc_spans if sp[0] - 1 <= row.idx <= sp[1] + 1), None)
            if near is not None:  # a neighbour of a better match: one passage
                near[0], near[1] = min(near[0], row.idx), max(near[1], row.idx)
                continue
            if len(doc_spans) >= per_doc:
                continue
            doc_spans.append([row.idx, row.idx, len(kept)])
        kept.append((chunk_id, score))
        if len(kept) == top_k:
            break
    floored = not kept and bool(removed.under) and not strict
    if floored:
        kept = kept_anyway(removed, doc_of, set(rows), min(top_k, FLOOR_KEEP))
    merged = {kept[sp[2]][0]: (sp[0], sp[1]) for doc_spans in spans.values()
              for sp in doc_spans if sp[0] != sp[1]}
    return Selection(kept, merged, removed, floored)
