"""Search over an index: the one code path behind `search`, `find_similar_documents`, the
CLI and `eval`.

A search is steps over plain data: the dates said in its query (`dated`), then retrieve
(`retrieve`: the vector and keyword lists), fuse (`fuse`: one ranking, one 0..1 score),
select (`select`: threshold, floor, matches per document, passages) and render (`render`).
Modes: `vector` (the index's vector file; `find_similar_documents` rescores what it returns
from the stored float32 vectors), `keyword` (BM25 over chunk text and document title) and
`hybrid` (both, fused). Documents rank at their best chunk when `unique_docs` is set;
otherwise at most `max_per_doc` matches come from one document, and a match next to a better
one is merged into it. `context` adds neighbouring chunks to each match.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import msgspec

from pocketmcp.core.safe import safe_text
from pocketmcp.errors import InvalidRequest
from pocketmcp.plans import Open, Reading
from pocketmcp.search import dated, deadline, floor, render, tuning
from pocketmcp.search.filters import Scope
from pocketmcp.search.floor import joined
from pocketmcp.search.fuse import (
    DEFAULT_PARAMS,
    MODES,
    Mode,
    Params,
    fuse,
    keywords_alone,
    ranked,
    shown,
)
from pocketmcp.search.render import Hit, with_context, with_passages, with_spots
from pocketmcp.search.results import FindSimilarResult, SearchResult
from pocketmcp.search.retrieve import Retrieved, exact_scores, retrieve
from pocketmcp.search.select import Selection, select
from pocketmcp.store.api import Reader

MAX_SIMILAR = 100
MAX_PER_DOC = 2  # matches from one document, by default
SCORE_THRESHOLD = 0.2  # the search tool's default
# Rankings of one ask at most: again when chunks it ranked were gone before their rows were
# read (their document changed or was removed meanwhile; a chunk getting its vector keeps
# its id).
TRIES = 3
__all__ = ["DEFAULT_PARAMS", "MODES", "Mode", "Params", "Scope", "find_similar", "search"]


@dataclass(frozen=True, kw_only=True)
class Ask:
    """One search as asked."""

    query: str
    top_k: int
    scope: Scope | None = None
    threshold: float | None = None
    mode: Mode = "hybrid"
    unique_docs: bool = False
    context: int = 0
    per_doc: int = 0  # matches from one document at most, neighbours merged (0: any)
    strict: bool = False  # no match under the threshold, not even the best few
    exact: bool = False  # vector scores from the stored float32 vectors
    fallback: bool = True  # keyword matches when the query cannot be embedded
    params: Params = DEFAULT_PARAMS
    spots: bool = True  # each hit's lines (and pages) in its document


@dataclass(frozen=True)
class Answer:
    """What one ask found, and its notices."""

    hits: list[Hit]
    notice: str | None
    pending: str | None


async def search(reading: Reading, query: str, *, top_k: int = 8, scope: Scope | None = None,
                 score_threshold: float | None = None, mode: Mode = "hybrid",
                 unique_docs: bool = False, context: int = 0,
                 max_per_doc: int = MAX_PER_DOC,
                 params: Params | None = None, fallback: bool = True,
                 strict_threshold: bool = False, dates: bool = False) -> SearchResult:
    """The best matches for `query`, best first. At most `max_per_doc` matches come from one
    document (0: no limit), and a match next to a better one of the same document is merged
    into it as one passage (not with 0). When the query cannot be embedded (the provider is
    down), hybrid and vector searches answer with keyword matches and a notice saying so;
    without `fallback` they raise instead. When `score_threshold` removes every match, the
    best few are returned anyway with a notice saying so (`floor`), unless
    `strict_threshold`. With `dates`, a date said in the query ("last week") filters the
    documents by their dates (`dated`). Without `params`, the index's own tuning
    (`tuning`: the defaults, or the fusion weight `check-search --apply` kept)."""
    params = params if params is not None else tuning.params_of(reading.index)
    if max_per_doc < 0:
        raise InvalidRequest("max_per_doc must be 0 (no limit) or more")
    ask = Ask(query=query, top_k=top_k, scope=scope, threshold=score_threshold, mode=mode,
              unique_docs=unique_docs, context=context, per_doc=max_per_doc,
              strict=strict_threshold, fallback=fallback, params=params)
    # One deadline (SEARCH_TIMEOUT_S) for the whole search; indexing in this process gives
    # way meanwhile (marked once the index is open, so a search that waits for the first
    # scan does not hold that scan back).
    with reading.precedence.searching():
        async with deadline.within(reading.deadline_s):
            span = dated.span_of(query, scope) if dates else None
            found, said = None, None
            if span is not None:
                # The span's documents are kept whatever their score (unless the threshold
                # is strict), those no retriever brought after the others.
                within = dated.scoped(span, scope)
                found = await answer(reading, replace(
                    ask, query=span.query, scope=within,
                    threshold=score_threshold if strict_threshold else None))
                got = found.hits
                found = replace(found, hits=got + (await reading.index.run(
                    lambda r: dated.rest_of_span(r, within, got, top_k - len(got),
                                                 reading.index.root))
                    if not strict_threshold else []))
                under = dated.under(found.hits, score_threshold)
                stood = dated.stands(span, bool(found.hits), bool(found.hits) and (
                    len(under) == len(found.hits)))
                said = dated.said(span, stood, len(under), score_threshold,
                                  best=max((h.score for h in found.hits), default=0.0))
                # Each hit says the date that placed it in the span.
                found = replace(found, hits=[msgspec.structs.replace(
                    h, matched_date=h.row.created) for h in found.hits]) if stood else None
            if found is None:  # no date said, or the span's answer does not stand
                found = await answer(reading, ask)
            return render.search_result(found.hits, said, found.notice, found.pending)


async def find_similar(open_reading: Open[Reading], text: str, top_k: int = 10, *,
                       max_bytes: int) -> FindSimilarResult:
    """The chunks nearest to `text` by cosine similarity, best first: a vector search."""
    if not 1 <= top_k <= MAX_SIMILAR:
        raise InvalidRequest(f"top_k must be from 1 to {MAX_SIMILAR}")
    query = safe_text(text)
    if not query.strip():
        raise InvalidRequest("text is empty: give the text to find similar documents to")
    if len(query.encode("utf-8")) > max_bytes:
        raise InvalidRequest(f"text is larger than MAX_FILE_MB ({max_bytes} bytes)")
    reading = await open_reading()
    with reading.precedence.searching():  # indexing gives way, as to a search
        async with deadline.within(reading.deadline_s):  # SEARCH_TIMEOUT_S, as a search
            found = await answer(reading, Ask(query=query, top_k=top_k, mode="vector",
                                              exact=True, spots=False))
    return render.similar_result(found.hits, found.notice, found.pending)


async def answer(reading: Reading, ask: Ask) -> Answer:
    """One ask through retrieve, fuse, select and render. The one retry: when chunks it
    ranked were gone before their rows were read, it ranks again (TRIES in all at most),
    without embedding the query again."""
    params = ask.params
    # Documents can hold many chunks: look deeper when only one per document is kept.
    depth = max(params.depth, ask.top_k * (4 if ask.unique_docs else 1))
    found: Retrieved | None = None
    for _ in range(TRIES):
        found = await retrieve(reading, ask.query, mode=ask.mode, depth=depth, scope=ask.scope,
                               params=params, unique_docs=ask.unique_docs,
                               fallback=ask.fallback, again=found, waiting=True)
        hits, selection, gone = await _ranked(reading, ask, found)
        if not gone:
            break
    assert found is not None
    if not hits:
        reading.require_complete()
    removed = selection.removed
    notice = found.notice
    if removed.under and not any(h.score >= removed.threshold for h in hits):
        notice = joined(notice, floor.notice(removed, len(hits)))
    return Answer(hits, notice, render.pending_notice(found.waiting, ask.mode))


async def _ranked(reading: Reading, ask: Ask, found: Retrieved
                  ) -> tuple[list[Hit], Selection, bool]:
    """The hits of one retrieval (fuse, then select and render on one read of the rows),
    what was selected, and whether chunks it ranked were gone."""
    index, stage, params, query_vector = reading.index, found.stage, ask.params, found.vector
    mode, threshold = ask.mode, ask.threshold
    if found.notice is not None:  # keyword matches only, by their own scale
        mode, threshold = "keyword", None
    scores = fuse(stage, mode, params, ask.unique_docs)
    waiting = found.waiting_hits
    if mode == "hybrid":
        scores = keywords_alone(stage, scores, waiting, params)
    # Spares: a chunk removed by a commit since the lists were made is skipped, not missed.
    order = ranked(stage, scores, unique_docs=ask.unique_docs,
                   most=ask.top_k * (4 if ask.per_doc else 2))
    by_document = ask.unique_docs and bool(stage.doc_keyword)

    def read(reader: Reader) -> tuple[list[Hit], Selection, bool]:
        # A hybrid match found by words alone gets its cosine from the stored vector, so
        # that its score weighs both; `exact` rescores every returned vector score.
        missing = [c for c in order if c not in stage.vector] if (
            mode == "hybrid" and query_vector is not None) else []
        looked_up = exact_scores(reader, index, missing, query_vector) if (
            missing and query_vector is not None) else {}
        rows = reader.hits(order)  # gone since the lists were made: not there, and skipped

        def vector_of(chunk_id: int) -> float | None:
            return looked_up.get(chunk_id, stage.vector.get(chunk_id))

        scored = ((c, shown(stage, c, vector_of(c), mode, params, by_document=by_document,
                            waiting=waiting)) for c in order)
        selection = select(scored, rows, stage.doc_of, top_k=ask.top_k, threshold=threshold,
                           per_doc=ask.per_doc, strict=ask.strict)
        rescored = exact_scores(reader, index, [c for c, _ in selection.kept],
                                query_vector) if ask.exact and query_vector is not None else {}
        hits = render.hits_of(selection, rows, stage, lambda c: rescored.get(c, vector_of(c)),
                              root=index.root, params=params,
                              rescored=bool(rescored) and mode == "vector")
        hits = with_passages(reader, hits)
        if ask.spots:
            hits = with_spots(reader, hits)
        if ask.context and hits:
            hits = with_context(reader, hits, ask.context)
        return hits, selection, any(c not in rows for c in order)

    if not order:  # no rows to read
        return [], select((), {}, {}, top_k=1, threshold=threshold, per_doc=0, strict=True), False
    return await index.run(read)
