"""Every document of a Postgres index with what is needed to write it again (for export), as
the SQLite store's store/archive.py reads them."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any, Protocol

import numpy as np

from pocketmcp.messages import Link
from pocketmcp.store.archive import StoredChunk, StoredDoc

PAGE = 100  # documents read at a time


class Rows(Protocol):
    def __call__(self, sql: str, args: Sequence[Any] = ()) -> list[Any]: ...


def documents(rows: Rows) -> Iterator[StoredDoc]:
    """Every document in doc_id order (blocking). Call inside the reader's snapshot."""
    after = 0
    while page := rows(
            "SELECT doc_id, external_id, source, uri, title, library, metadata::text, "
            "properties::text, tags::text, created, modified, content, content_sha256, "
            "size_bytes, mtime_ns, created_at, updated_at FROM documents WHERE doc_id > %s "
            "ORDER BY doc_id LIMIT %s", (after, PAGE)):
        after = page[-1][0]
        ids = [r[0] for r in page]
        chunks: dict[int, list[StoredChunk]] = {d: [] for d in ids}
        for doc_id, idx, start, end, tokens, sha, section, vector in rows(
                "SELECT doc_id, idx, start_off, end_off, tokens, text_sha256, section, "
                "embedding FROM chunks WHERE doc_id = ANY(%s) ORDER BY doc_id, idx", (ids,)):
            chunks[doc_id].append(StoredChunk(  # no embedding yet: the chunk waits for it
                idx, start, end, tokens, sha, section,
                None if vector is None else np.asarray(vector.to_numpy(), "<f4").tobytes()))
        links: dict[int, list[Link]] = {d: [] for d in ids}
        for doc_id, target, key, kind in rows(
                "SELECT doc_id, target, key, kind FROM links WHERE doc_id = ANY(%s) "
                "ORDER BY doc_id, idx", (ids,)):
            links[doc_id].append(Link(target, key, kind))
        for (doc_id, external_id, source, uri, title, library, metadata, properties, tags,
             created, modified, content, sha, size, mtime, first, last) in page:
            yield StoredDoc(
                external_id=external_id, source=source, uri=uri, title=title, library=library,
                metadata=_canonical(metadata), properties=_canonical(properties), tags=tags,
                created=created, modified=modified, content=content, sha256=sha,
                size_bytes=size, mtime_ns=mtime, first_indexed_at=first, indexed_at=last,
                links=tuple(links[doc_id]), chunks=tuple(chunks[doc_id]))


def _canonical(text: str) -> str:
    """JSON as the SQLite store keeps it (jsonb's own text has other spacing)."""
    return json.dumps(json.loads(text), ensure_ascii=False, sort_keys=True)
