"""What one transaction of the writer does with a batch of items: documents written,
touched, deleted and removed, each item inside its own savepoint, and the counts and answers
that come of it. Blocking; run by the writer actor (pipeline/writer.py) in its thread."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from pocketmcp.core.paths import path_of, watched_id
from pocketmcp.errors import InvalidRequest, PocketError, StoreError
from pocketmcp.messages import (
    DocRecord,
    DocsSubmitted,
    FileChunked,
    FileGone,
    FileHashed,
    FileTouched,
    RemovalAsked,
    ScanDone,
    ToWriter,
    VectorsFound,
    Written,
)
from pocketmcp.store.api import StoreWriter

# Errors of one item (a value SQLite cannot bind, text it rejects, a constraint): they undo
# that item's savepoint and the batch goes on. Failures of BEGIN or COMMIT end the writer.
ITEM_ERRORS = (UnicodeError, ValueError, OverflowError, StoreError)


class Outcome:
    """What one transaction did: log events, and each request's answer."""

    def __init__(self, commit: int) -> None:
        self.commit = commit
        self.events: list[dict[str, Any]] = []
        self.answers: dict[int, object] = {}  # position in the batch -> reply


def apply_batch(writer: StoreWriter, items: Sequence[ToWriter]) -> Outcome:
    """Write `items` in one transaction (blocking), their documents locked against other
    writers of the same index (with Postgres, other processes may write it too)."""
    return writer.batch(lambda: _apply_all(writer, items), _keys(items))


def _keys(items: Sequence[ToWriter]) -> list[str]:
    """The external ids `items` write, to lock (a removal by doc_id locks its row instead)."""
    keys: set[str] = set()
    for item in items:
        if isinstance(item, FileChunked):
            keys.add(watched_id(item.doc.rel))
        elif isinstance(item, VectorsFound):
            keys.add(item.external_id)
        elif isinstance(item, FileGone | FileTouched):
            keys.add(watched_id(item.rel))
        elif isinstance(item, DocsSubmitted):
            keys.update(p.record.external_id for p in item.docs)
        elif isinstance(item, RemovalAsked):
            keys.update(item.external_ids)
    return sorted(keys)


def _apply_all(writer: StoreWriter, items: Sequence[ToWriter]) -> Outcome:
    outcome = Outcome(writer.commits + 1)
    for position, item in enumerate(items):
        try:
            with writer.item():
                _apply_one(writer, item, position, outcome)
        except ITEM_ERRORS as exc:  # this item's own data: only its savepoint is undone
            if isinstance(item, DocsSubmitted | RemovalAsked):
                outcome.answers[position] = exc if isinstance(exc, PocketError) else (
                    InvalidRequest(f"cannot be stored: {exc}"))
            else:
                rel = item.doc.rel if isinstance(item, FileChunked) else (
                    item.external_id if isinstance(item, VectorsFound) else getattr(
                        item, "rel", ""))
                outcome.events.append({"event": "skipped", "path": rel,
                                       "reason": f"cannot be stored: {exc}",
                                       "error": True})
    return outcome


def _apply_one(writer: StoreWriter, item: ToWriter, position: int, outcome: Outcome) -> None:
    events = outcome.events
    if isinstance(item, FileChunked):  # keywords now, vectors when they come
        doc = item.doc
        written = writer.upsert(doc_record_of(item), item.chunks, None, rank=rank_of(doc))
        events.append({
            "event": "inserted" if written.status == "inserted" else "updated",
            "status": written.status,  # "unchanged": the same text, written again
            "path": doc.rel, "doc_id": written.doc_id, "chunks": written.chunks,
            # Chunks whose text the index held already have their vectors at once.
            "chunks_reused": written.chunks - written.waiting,
            "chunks_waiting": written.waiting,
            "chunks_removed": written.chunks_removed,
        })
    elif isinstance(item, VectorsFound):
        if writer.add_vectors(item.doc_id, item.sha256, item.chunks, item.vectors):
            events.append({"event": "embedded", "external_id": item.external_id,
                           "path": path_of(item.external_id, "file") or item.external_id,
                           "doc_id": item.doc_id, "chunks": len(item.chunks),
                           "chunks_embedded": len(item.chunks) - item.reused,
                           "chunks_reused": item.reused, "embed_ms": round(item.embed_ms, 1)})
    elif isinstance(item, FileGone):
        gone = writer.delete(watched_id(item.rel))
        if gone is not None:
            events.append({"event": "deleted", "path": item.rel, "doc_id": gone[0],
                           "chunks_removed": gone[1], "skipped": item.skipped})
    elif isinstance(item, FileTouched):
        writer.touch(watched_id(item.rel), item.size, item.mtime_ns)
        events.append({"event": "skipped", "path": item.rel, "reason": "unchanged"})
    elif isinstance(item, DocsSubmitted):
        results: list[Written] = []
        for prepared in item.docs:
            # Without vectors: keywords now, the vectors when the embedder has them (newest
            # first, as a file's: by its modification time, else now).
            written = writer.upsert(
                prepared.record, prepared.chunks, None if prepared.waiting else prepared.vectors,
                rank=prepared.record.mtime_ns or time.time_ns())
            results.append(written)
            events.append({"event": "stored", "source": "tool",
                           "external_id": prepared.record.external_id,
                           "doc_id": written.doc_id, "status": written.status,
                           "chunks": written.chunks, "chunks_reused": prepared.reused,
                           "chunks_removed": written.chunks_removed,
                           **({"chunks_waiting": written.waiting} if written.waiting else {})})
        outcome.answers[position] = results
    elif isinstance(item, ScanDone):  # the first scan: read-only processes learn it here
        writer.record_scan("done")
    elif isinstance(item, RemovalAsked):
        removed = writer.remove(item.doc_ids, item.external_ids)
        events.append({"event": "removed", "source": "tool", "doc_ids": list(removed.doc_ids),
                       "chunks_removed": removed.chunks})
        outcome.answers[position] = removed


def rank_of(doc: FileHashed) -> int:
    """Where a document's chunks wait for vectors: by its file's modification time, newest
    first, and an edit (the index held another version) by now, ahead of the rest."""
    return max(doc.mtime_ns, time.time_ns()) if doc.edit else doc.mtime_ns


def doc_record_of(item: FileChunked) -> DocRecord:
    """The document row of a watched file."""
    doc = item.doc
    return DocRecord(external_id=watched_id(doc.rel), source="file", uri=doc.uri,
                     title=doc.title, content=doc.text, sha256=doc.sha256, library=doc.library,
                     size_bytes=doc.size, mtime_ns=doc.mtime_ns, facts=doc.facts)
