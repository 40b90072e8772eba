"""Search over the index: the code path shared by the MCP tool, the CLI and `eval`."""

from __future__ import annotations

import msgspec
import pathspec

from pocketmcp.core.safe import preview
from pocketmcp.messages import rel_of
from pocketmcp.service import NotReady, Service
from pocketmcp.store.queries import IndexReader, VectorHit


class Filter(msgspec.Struct, frozen=True, kw_only=True):
    doc_ids: tuple[int, ...] | None = None
    path_glob: str | None = None


class Match(msgspec.Struct, frozen=True, kw_only=True):
    chunk_id: int
    doc_id: int
    idx: int
    score: float
    preview: str
    resource: str
    path: str | None
    title: str
    start_off: int
    end_off: int
    text: str = msgspec.field(default="")


def path_of(external_id: str, source: str) -> str | None:
    return rel_of(external_id) if source == "file" else None


def _glob_doc_ids(reader: IndexReader, glob: str) -> list[int]:
    """Documents whose path (files) or external id (others) matches a gitignore-style glob."""
    spec = pathspec.PathSpec.from_lines("gitignore", [glob])
    out = []
    for doc_id, ext in reader.all_external_ids():
        name = rel_of(ext) if ext.startswith("file:") else ext
        if spec.match_file(name):
            out.append(doc_id)
    return out


def _allowed(reader: IndexReader, flt: Filter | None) -> list[int] | None:
    if flt is None:
        return None
    allowed: list[int] | None = None
    if flt.doc_ids is not None:
        allowed = sorted(set(flt.doc_ids))
    if flt.path_glob:
        matching = _glob_doc_ids(reader, flt.path_glob)
        allowed = matching if allowed is None else sorted(set(allowed) & set(matching))
    return allowed


def _match(hit: VectorHit, score: float) -> Match:
    return Match(
        chunk_id=hit.chunk_id, doc_id=hit.doc_id, idx=hit.idx, score=round(score, 6),
        preview=preview(hit.text), resource=f"mcp+doc://{hit.doc_id}#{hit.chunk_id}",
        path=path_of(hit.external_id, hit.source), title=hit.title, start_off=hit.start_off,
        end_off=hit.end_off, text=hit.text,
    )


async def search(service: Service, query: str, *, top_k: int = 8, flt: Filter | None = None,
                 score_threshold: float | None = None) -> list[Match]:
    """Best chunks first. Waits (bounded) for the model and the index."""
    import anyio

    indexed = await service.wait_indexed()
    assert service.engine is not None
    embedder = service.engine.embedder
    vector = await anyio.to_thread.run_sync(embedder.embed_query, query,
                                            limiter=service.query_limiter)

    def run(reader: IndexReader) -> list[VectorHit]:
        return reader.search_vector(vector.tobytes(), top_k, _allowed(reader, flt))

    hits = await service.readers.run(run)
    matches = [_match(h, 1.0 - h.distance) for h in hits]
    if score_threshold is not None:
        matches = [m for m in matches if m.score >= score_threshold]
    if not matches and not indexed:
        raise NotReady("index still loading: the first scan of the folder has not finished "
                       "and nothing matches yet; try again in a few seconds")
    return matches
