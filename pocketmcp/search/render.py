"""The render step: a search's selection as hits (the chunk row with its scores, neighbouring
chunks joined into passages: merged matches, `context`), and hits as the results the tools
return."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

import msgspec

from pocketmcp.core.paths import path_of
from pocketmcp.core.safe import preview
from pocketmcp.search import floor
from pocketmcp.search.filters import is_stale
from pocketmcp.search.fuse import Mode, Params, Stage, background_of, vector_relevance
from pocketmcp.search.results import (
    FindSimilarResult,
    SearchMatch,
    SearchResult,
    SimilarChunk,
)
from pocketmcp.search.select import Selection
from pocketmcp.store.api import Reader
from pocketmcp.store.rows import HitRow, Spot


class Hit(msgspec.Struct, frozen=True):
    row: HitRow
    score: float
    vector_score: float | None
    keyword_score: float | None
    context: str | None = None
    first: int = -1  # with merged neighbours: the span of chunk positions it covers
    last: int = -1
    stale: bool | None = None
    spot: Spot | None = None  # its lines (and pages) in the document's text
    matched_date: str | None = None  # the date that placed it in a query's span


def hits_of(selection: Selection, rows: dict[int, HitRow], stage: Stage,
            vector_of: Callable[[int], float | None], *, root: Path | None, params: Params,
            rescored: bool) -> list[Hit]:
    """The kept chunks as hits, with their vector scores (`vector_of`) and whether their
    files changed since they were indexed (one stat per document, blocking); `rescored`
    when the vector scores are exact ones to rank by again (vector mode)."""
    found, stale = [], dict[int, bool | None]()
    for chunk_id, score in selection.kept:
        vector_score = vector_of(chunk_id)
        if rescored and vector_score is not None:
            score = vector_relevance(vector_score, background_of(stage, params))
        first, last = selection.merged.get(chunk_id, (-1, -1))
        row = rows[chunk_id]
        if row.doc_id not in stale:
            stale[row.doc_id] = is_stale(root, row.external_id, row.source, row.size_bytes,
                                         row.mtime_ns)
        found.append(Hit(row, score, vector_score, stage.keyword.get(chunk_id),
                         first=first, last=last, stale=stale[row.doc_id]))
    if rescored:
        found.sort(key=lambda h: -h.score)
    return found


def search_result(hits: Sequence[Hit], *notices: str | None) -> SearchResult:
    return SearchResult(matches=[match_of(h) for h in hits], notice=floor.joined(*notices))


def similar_result(hits: Sequence[Hit], notice: str | None, pending: str | None
                   ) -> FindSimilarResult:
    """The nearest chunks, each with its cosine itself, as documented."""
    if notice:
        notice += "; `score` is then a keyword score, not a cosine similarity"
    return FindSimilarResult(results=[
        SimilarChunk(chunk_id=h.row.chunk_id, doc_id=h.row.doc_id, text=h.row.text,
                     score=round(h.score if h.vector_score is None else h.vector_score, 6))
        for h in hits], notice=floor.joined(notice, pending))


def pending_notice(count: int, mode: Mode) -> str | None:
    """What a search says when chunks wait for their vectors (none when none do)."""
    if not count:
        return None
    where = ("they are found by their keywords until then" if mode == "hybrid"
             else "vector results leave them out until then")
    return f"{count} chunks still wait for their vectors: {where}"


def match_of(hit: Hit) -> SearchMatch:
    row, spot = hit.row, hit.spot
    return SearchMatch(
        chunk_id=row.chunk_id, doc_id=row.doc_id, idx=row.idx, score=round(hit.score, 6),
        vector_score=None if hit.vector_score is None else round(hit.vector_score, 6),
        keyword_score=None if hit.keyword_score is None else round(hit.keyword_score, 6),
        preview=preview(row.text), resource=f"mcp+doc://{row.doc_id}#{row.chunk_id}",
        path=path_of(row.external_id, row.source), title=row.title, start_off=row.start_off,
        end_off=row.end_off, start_line=spot.start_line if spot else None,
        end_line=spot.end_line if spot else None, page=spot.page if spot else None,
        end_page=spot.end_page if spot else None, matched_date=hit.matched_date,
        section=row.section, library=row.library, context=hit.context,
        merged_idx=[] if hit.first < 0 else list(range(hit.first, hit.last + 1)),
        modified_at=row.modified, created=row.created, indexed_at=row.indexed_at,
        tags=json.loads(row.tags), stale=hit.stale,
    )


def with_context(reader: Reader, hits: Sequence[Hit], around: int) -> list[Hit]:
    """Each hit with the text of up to `around` chunks before and after it, joined at their
    offsets so overlaps are not repeated."""
    out = []
    for h in hits:
        first, last = (h.first, h.last) if h.first >= 0 else (h.row.idx, h.row.idx)
        text, _, _ = joined(reader.neighbours(h.row.doc_id, max(0, first - around),
                                               last + around))
        out.append(msgspec.structs.replace(h, context=text))
    return out


def with_spots(reader: Reader, hits: Sequence[Hit]) -> list[Hit]:
    """Each hit with its first and last line in its document's text (its pages in a PDF),
    those of its merged neighbours' span included (blocking)."""
    single = reader.spots([h.row.chunk_id for h in hits if h.first < 0])
    return [msgspec.structs.replace(h, spot=single.get(h.row.chunk_id) if h.first < 0 else
                                    reader.spot(h.row.doc_id, h.first, h.last)) for h in hits]


def with_passages(reader: Reader, hits: Sequence[Hit]) -> list[Hit]:
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
