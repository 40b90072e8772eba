"""A search's hits before they are answered: the chunk row with its scores, neighbouring
chunks joined into passages (merged matches, `context`), and the match the tools return."""

from __future__ import annotations

import json
from collections.abc import Sequence

import msgspec

from pocketmcp.core.paths import path_of
from pocketmcp.core.safe import preview
from pocketmcp.ops.results import SearchMatch
from pocketmcp.store.api import Passages
from pocketmcp.store.rows import HitRow


class Hit(msgspec.Struct, frozen=True):
    row: HitRow
    score: float
    vector_score: float | None
    keyword_score: float | None
    context: str | None = None
    first: int = -1  # with merged neighbours: the span of chunk positions it covers
    last: int = -1
    stale: bool | None = None


def match_of(hit: Hit) -> SearchMatch:
    row = hit.row
    return SearchMatch(
        chunk_id=row.chunk_id, doc_id=row.doc_id, idx=row.idx, score=round(hit.score, 6),
        vector_score=None if hit.vector_score is None else round(hit.vector_score, 6),
        keyword_score=None if hit.keyword_score is None else round(hit.keyword_score, 6),
        preview=preview(row.text), resource=f"mcp+doc://{row.doc_id}#{row.chunk_id}",
        path=path_of(row.external_id, row.source), title=row.title, start_off=row.start_off,
        end_off=row.end_off, section=row.section, library=row.library, context=hit.context,
        merged_idx=[] if hit.first < 0 else list(range(hit.first, hit.last + 1)),
        modified_at=row.modified, created=row.created, indexed_at=row.indexed_at,
        tags=json.loads(row.tags), stale=hit.stale,
    )


def with_context(reader: Passages, hits: Sequence[Hit], around: int) -> list[Hit]:
    """Each hit with the text of up to `around` chunks before and after it, joined at their
    offsets so overlaps are not repeated."""
    out = []
    for h in hits:
        first, last = (h.first, h.last) if h.first >= 0 else (h.row.idx, h.row.idx)
        text, _, _ = joined(reader.neighbours(h.row.doc_id, max(0, first - around),
                                               last + around))
        out.append(msgspec.structs.replace(h, context=text))
    return out


def with_passages(reader: Passages, hits: Sequence[Hit]) -> list[Hit]:
    """Hits that merged neighbouring matches carry the joined passage as `context`, and
    their offsets span it."""
    out = []
    for h in hits:
        if h.first < 0:
            out.append(h)
            continue
        text, start, end = joined(reader.neighbours(h.row.doc_id, h.first, h.last))
        row = msgspec.structs.replace(h.row, start_off=start, end_off=end)
        out.append(msgspec.structs.replace(h, row=row, context=text))
    return out


def joined(parts: Sequence[tuple[int, int, int, str]]) -> tuple[str, int, int]:
    """Chunks in order joined at their offsets, so overlaps are not repeated; (text, start,
    end)."""
    text, begin, end = "", -1, -1
    for _idx, start, stop, chunk in parts:
        if end < 0:
            text, begin, end = chunk, start, stop
        elif stop > end:
            text += chunk[max(0, end - start):] if start < end else "\n\n" + chunk
            end = stop
    return text, begin, end
