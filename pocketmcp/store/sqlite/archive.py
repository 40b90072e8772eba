"""Copies of a SQLite index: every document with its chunks, vectors and links, read as one
snapshot (for export), and a page-for-page copy of the file made with SQLite's backup API.

Both read through a read-only connection, so they run while the writer writes: a snapshot
sees one committed state from start to end.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from pocketmcp.errors import StoreError
from pocketmcp.messages import Link
from pocketmcp.store.archive import StoredChunk, StoredDoc
from pocketmcp.store.sqlite.connect import open_sync_reader, sqlite_errors, sqlite_module

Query = Callable[[str, Sequence[Any]], list[Any]]

_DOC = ("SELECT doc_id, external_id, source, uri, title, library, metadata, properties, tags, "
        "created, modified, content, content_sha256, size_bytes, mtime_ns, created_at, "
        "updated_at FROM documents WHERE doc_id > ? ORDER BY doc_id LIMIT 1")
_CHUNKS = ("SELECT chunk_id, idx, start_off, end_off, tokens, text_sha256, section, waiting "
           "FROM chunks WHERE doc_id = ? ORDER BY idx")


def documents(query: Query, db_path: Path) -> Iterator[StoredDoc]:
    """Every document in doc_id order, read with `query` on one connection to the index at
    `db_path` (blocking). Call inside the reader's `snapshot()`."""
    after = 0
    while True:
        rows = query(_DOC, (after,))
        if not rows:
            return
        (doc_id, external_id, source, uri, title, library, metadata, properties, tags,
         created, modified, content, sha, size, mtime, first, last) = rows[0]
        after = doc_id
        chunks = []
        for chunk_id, idx, start, end, tokens, text_sha, section, waiting in query(
                _CHUNKS, (doc_id,)):
            vector = None  # a chunk written for keywords waits for its vector
            if not waiting:
                found = query("SELECT embedding FROM vec_chunks WHERE chunk_id = ?",
                              (chunk_id,))
                if not found:
                    raise StoreError(f"{db_path}: chunk {chunk_id} has no vector")
                vector = bytes(found[0][0])
            chunks.append(StoredChunk(idx, start, end, tokens, text_sha, section, vector))
        links = tuple(Link(t, k, kind) for t, k, kind in query(
            "SELECT target, key, kind FROM links WHERE doc_id = ? ORDER BY idx", (doc_id,)))
        yield StoredDoc(external_id=external_id, source=source, uri=uri, title=title,
                        library=library, metadata=metadata, properties=properties, tags=tags,
                        created=created, modified=modified, content=content, sha256=sha,
                        size_bytes=size, mtime_ns=mtime, first_indexed_at=first,
                        indexed_at=last, links=links, chunks=tuple(chunks))


def backup(source: Path, target: Path) -> int:
    """Copy the index at `source` to `target` with SQLite's backup API, from a read-only
    connection: a consistent copy even while its writer writes (blocking). The copy is
    written beside `target` and renamed over it when complete. Returns its size in bytes."""
    partial = target.with_name(target.name + ".partial")
    src = open_sync_reader(source)
    try:
        partial.unlink(missing_ok=True)
        dst: Any = sqlite_module().connect(str(partial))
        try:
            src.backup(dst)  # one step: one read transaction, so one committed state
            problem = dst.execute("PRAGMA quick_check").fetchone()[0]
            if problem != "ok":
                raise StoreError(f"the copy of {source} failed its check: {problem}")
        finally:
            dst.close()
        os.replace(partial, target)
    except sqlite_errors() as exc:
        raise StoreError(f"cannot back up {source} to {target}: {exc}") from exc
    except OSError as exc:
        raise StoreError(f"cannot write {target}: {exc}") from exc
    finally:
        src.close()
        partial.unlink(missing_ok=True)
    return target.stat().st_size
