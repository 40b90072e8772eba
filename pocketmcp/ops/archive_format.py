"""The lines of an export file (`pocketmcp export`): a header, one line per document, and an
end line. See ops/archive.py for the format as a whole."""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from pocketmcp.core.identity import Identity
from pocketmcp.messages import Link
from pocketmcp.store.archive import ChunkPlace

FORMAT = "pocketmcp-export"
VERSION = 1
IMPORT_BATCH = 32  # documents embedded at a time when the file's model is another one


class Header(msgspec.Struct, frozen=True):
    format: str
    version: int
    model_id: str
    dim: int
    vector: str = "float32-le-base64"
    exported_at: str = ""
    # What made the vectors (provider, prefixes: core/identity.py); older files name the
    # model alone, which then means the built-in provider without prefixes.
    embedding: dict[str, str] = msgspec.field(default_factory=dict)

    def identity(self) -> Identity:
        return (Identity.from_meta(self.embedding)
                or Identity(model=self.model_id, dim=self.dim))


class ChunkLine(ChunkPlace, frozen=True):
    vector: str | None  # None (null): the chunk was written for keywords, its vector to come


class DocLine(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="document"):
    external_id: str
    source: Literal["file", "url", "raw"]
    uri: str | None
    title: str
    library: str
    metadata: dict[str, Any]
    properties: dict[str, Any]
    tags: list[str]
    created: str | None
    modified: str | None
    links: list[Link]
    content: str
    sha256: str
    size_bytes: int | None
    mtime_ns: int | None
    first_indexed_at: str = ""
    indexed_at: str = ""
    chunks: list[ChunkLine]


class EndLine(msgspec.Struct, frozen=True, tag_field="type", tag="end"):
    documents: int
    chunks: int
    waiting: int = 0  # of the chunks, those without a vector (older files: none)
