"""The rows an index answers with, the same from every store."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Literal

import msgspec

Sort = Literal["doc_id", "modified", "path"]


class ChunkTextRow(msgspec.Struct, frozen=True):
    """A chunk: its place in its document, and its text."""

    chunk_id: int
    doc_id: int
    idx: int
    start_off: int
    end_off: int
    text: str


class Spot(msgspec.Struct, frozen=True):
    """Where a stretch of a document's text lies: its first and last line (1-based,
    inclusive), and in a PDF, its first and last page (None elsewhere)."""

    start_line: int | None
    end_line: int | None
    page: int | None = None
    end_page: int | None = None


class HitRow(ChunkTextRow, frozen=True):
    external_id: str
    uri: str | None
    title: str
    source: str
    section: str
    library: str
    size_bytes: int | None
    mtime_ns: int | None
    created: str | None
    modified: str | None
    indexed_at: str
    tags: str  # JSON list


class VectorHit(HitRow, frozen=True):
    distance: float


class DocumentRow(msgspec.Struct, frozen=True):
    doc_id: int
    external_id: str
    source: str
    uri: str | None
    title: str
    library: str
    metadata: str
    content_sha256: str
    chunk_count: int
    created_at: str
    updated_at: str
    properties: str
    tags: str  # JSON list
    created: str | None
    modified: str | None
    size_bytes: int | None
    mtime_ns: int | None


class DocState(msgspec.Struct, frozen=True):
    sha256: str
    size: int | None
    mtime_ns: int | None
    library: str


class ChunkRow(ChunkTextRow, frozen=True):
    title: str
    external_id: str


class Keywords(msgspec.Struct):
    """What the keyword retriever found for one query: chunk id -> score (higher is better),
    each chunk's document, the score a text of average length holding each query word once
    gets (the 0..1 scale's midpoint), and with whole-document matching, document id -> score
    and each such document's first chunk."""

    keyword: dict[int, float] = msgspec.field(default_factory=dict)
    doc_of: dict[int, int] = msgspec.field(default_factory=dict)
    reference: float = 1.0
    doc_keyword: dict[int, float] = msgspec.field(default_factory=dict)
    first_chunk: dict[int, int] = msgspec.field(default_factory=dict)


class WaitingChunk(msgspec.Struct, frozen=True):
    """A chunk written for keyword search whose vector has not come yet."""

    idx: int
    start_off: int
    end_off: int
    tokens: int
    text_sha256: str
    section: str
    text: str


class WaitingDoc(msgspec.Struct, frozen=True):
    """A document whose chunks wait for their vectors, as the index holds it now."""

    doc_id: int
    external_id: str
    sha256: str
    chunks: tuple[WaitingChunk, ...]


def waiting_docs(heads: Iterable[Sequence[Any]],
                 chunk_rows: Iterable[Sequence[Any]]) -> list[WaitingDoc]:
    """The waiting documents of two queries' rows, in the order of `heads`: (doc_id,
    external_id, content_sha256, content) a document, and (doc_id, idx, start_off, end_off,
    tokens, text_sha256, section) each of their waiting chunks, in order of idx."""
    chunks: dict[int, list[Sequence[Any]]] = {}
    for row in chunk_rows:
        chunks.setdefault(int(row[0]), []).append(row)
    return [WaitingDoc(int(doc_id), str(external_id), str(sha), tuple(
        WaitingChunk(int(i), int(s), int(e), int(t), str(h), str(sec), content[s:e])
        for _, i, s, e, t, h, sec in chunks.get(int(doc_id), ())))
        for doc_id, external_id, sha, content in heads]
