"""The sink: the only actor that writes the index. One transaction per batch of files."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream

from pocketmcp import logs
from pocketmcp.messages import (
    Embedded,
    FileEmbedded,
    FileGone,
    FileTouched,
    ScanDone,
    external_id,
)
from pocketmcp.pipeline.state import InFlight, Stats
from pocketmcp.store.writes import DocRecord, IndexWriter

log = logs.get("pocketmcp.writer")

EventHook = Callable[[dict[str, Any]], None]


def _apply(writer: IndexWriter, items: list[Embedded]) -> list[dict[str, Any]]:
    """Write `items` in one transaction (blocking); one event dict per file."""
    events: list[dict[str, Any]] = []
    with writer.transaction():
        for item in items:
            try:
                with writer.item():
                    _apply_one(writer, item, events)
            except (UnicodeError, ValueError) as exc:  # this document's own data
                rel = item.doc.rel if isinstance(item, FileEmbedded) else getattr(item, "rel", "")
                events.append({"event": "skipped", "path": rel,
                               "reason": f"cannot be stored: {exc}"})
    return events


def _apply_one(writer: IndexWriter, item: Embedded, events: list[dict[str, Any]]) -> None:
    if isinstance(item, FileEmbedded):
        doc = item.doc
        record = DocRecord(
            external_id=external_id(doc.rel), source="file", uri=doc.uri,
            title=doc.title, content=doc.text, sha256=doc.sha256, library=doc.library,
            size_bytes=doc.size, mtime_ns=doc.mtime_ns,
        )
        written = writer.upsert(record, item.chunks, item.vectors)
        events.append({
            "event": "inserted" if written.status == "inserted" else "updated",
            "path": doc.rel, "doc_id": written.doc_id, "chunks": written.chunks,
            "chunks_embedded": len(item.chunks) - item.reused,
            "chunks_reused": item.reused, "chunks_removed": written.chunks_removed,
            "embed_ms": round(item.embed_ms, 1),
        })
    elif isinstance(item, FileGone):
        gone = writer.delete(external_id(item.rel))
        if gone is not None:
            events.append({"event": "deleted", "path": item.rel, "doc_id": gone[0],
                           "chunks_removed": gone[1]})
    elif isinstance(item, FileTouched):
        writer.touch(external_id(item.rel), item.size, item.mtime_ns)
        events.append({"event": "skipped", "path": item.rel, "reason": "unchanged"})


async def write_index(
    inbox: MemoryObjectReceiveStream[Embedded], *, writer: IndexWriter, inflight: InFlight,
    stats: Stats, batch_files: int, limiter: anyio.CapacityLimiter,
    on_event: EventHook | None = None, on_scan_done: Callable[[ScanDone], None] | None = None,
) -> None:
    """Commit what arrives; `limiter` is shared with every other user of `writer`."""

    async def flush(items: list[Embedded]) -> None:
        files: list[Embedded] = [i for i in items if not isinstance(i, ScanDone)]
        if files:
            started = time.perf_counter()
            # Not abandoned on cancel: a started transaction always commits or rolls back.
            events = await anyio.to_thread.run_sync(_apply, writer, files, limiter=limiter)
            write_ms = round((time.perf_counter() - started) * 1000, 1)
            for item in files:
                if isinstance(item, FileEmbedded):
                    inflight.done(item.doc.rel, item.doc.seq)
                elif isinstance(item, FileGone):
                    inflight.done(item.rel, item.seq)
            for event in events:
                kind = event["event"]
                if kind == "inserted":
                    stats.added += 1
                elif kind == "updated":
                    stats.updated += 1
                elif kind == "deleted":
                    stats.removed += 1
                if kind != "skipped":
                    stats.chunks_written += event.get("chunks", 0)
                event["write_ms"] = write_ms
                event["batch_files"] = len(files)
                if on_event is not None:
                    on_event(event)
        for marker in items:
            if isinstance(marker, ScanDone) and on_scan_done is not None:
                on_scan_done(marker)

    async with inbox:
        pending: list[Embedded] = []
        while True:
            try:
                item = inbox.receive_nowait()
            except anyio.WouldBlock:
                if pending:
                    await flush(pending)
                    pending = []
                    continue
                try:
                    item = await inbox.receive()
                except anyio.EndOfStream:
                    break
            except anyio.EndOfStream:
                break
            pending.append(item)
            if len(pending) >= batch_files or isinstance(item, ScanDone):
                await flush(pending)
                pending = []
        if pending:
            await flush(pending)
