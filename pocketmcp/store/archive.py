"""A document as an index holds it, with everything needed to write it again: what every
store's reader yields for an export (`Reader.stored_documents`), one snapshot from start to
end."""

from __future__ import annotations

import msgspec

from pocketmcp.messages import Link


class StoredChunk(msgspec.Struct, frozen=True):
    idx: int
    start: int
    end: int
    tokens: int
    sha256: str
    section: str
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
