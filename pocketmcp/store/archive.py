"""A document as an index holds it, with everything needed to write it again: what every
store's reader yields for an export (`Reader.stored_documents`), one snapshot from start to
end."""

from __future__ import annotations

import msgspec

from pocketmcp.messages import Link


class ChunkPlace(msgspec.Struct, frozen=True):
    """Where a chunk is in its document's text, and what its vector is found by (an export
    file's chunk lines hold the same: ops/archive_format.py)."""

    idx: int
    start: int
    end: int
    tokens: int
    sha256: str
    section: str


class StoredChunk(ChunkPlace, frozen=True):
    vector: bytes | None  # float32, little-endian; None: the chunk waits for it


class StoredDoc(msgspec.Struct, frozen=True, kw_only=True):
    """A document as the index holds it, with everything needed to write it again."""

    external_id: str
    source: str
    uri: str | None
    title: str
    library: str
    metadata: str  # JSON
    properties: str  # JSON
    tags: str  # JSON list
    created: str | None
    modified: str | None
    content: str
    sha256: str
    size_bytes: int | None
    mtime_ns: int | None
    first_indexed_at: str
    indexed_at: str
    links: tuple[Link, ...]
    chunks: tuple[StoredChunk, ...]
