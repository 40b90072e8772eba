"""The sink: THE writer of one index file. Nothing else in the process changes it.

Its inbox carries two kinds of work, in one order: file changes from the embedder (and scan
markers), and tool requests (documents to write, documents to remove), each with a one-shot
reply stream. What arrives together is committed in one transaction, each item inside its own
savepoint; replies go out only after the commit, so a tool that has its answer can find its
documents. A request whose reply nobody waits for any more is committed all the same.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from contextlib import suppress
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from pocketmcp import logs
from pocketmcp.errors import PocketError, Stopping, StoreError, single
from pocketmcp.messages import (
    DocsSubmitted,
    FileChunked,
    FileGone,
    PreparedDoc,
    RemovalAsked,
    Removed,
    ScanDone,
    ToWriter,
    VectorsFound,
    Written,
)
from pocketmcp.pipeline.batches import Outcome, apply_batch
from pocketmcp.pipeline.precedence import Precedence
from pocketmcp.pipeline.state import Backlog, InFlight, Stats, depth
from pocketmcp.store.api import StoreWriter, View
from pocketmcp.store.folder import FolderRecord

log = logs.get("pocketmcp.writer")

EventHook = Callable[[dict[str, Any]], None]
Request = DocsSubmitted | RemovalAsked
GATHER_S = 0.05  # at most this long from a folder's first file to its transaction's commit


def _answer(request: Request, answer: object) -> None:
    """Send a request its one reply and close the stream; a caller gone away is no error."""
    with request.reply, suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
        request.reply.send_nowait(answer)


async def write_index(
    inbox: MemoryObjectReceiveStream[ToWriter], *, writer: StoreWriter, inflight: InFlight,
    stats: Stats, batch_files: int, on_event: EventHook | None = None,
    on_scan_done: Callable[[ScanDone], None] | None = None,
    after_commit: Callable[[], None] | None = None, backlog: Backlog | None = None,
    gather_files: int = 0, precedence: Precedence | None = None,
) -> None:
    """Commit what arrives until every sender has closed its end of `inbox`; `backlog`
    hears of documents written for keywords (their vectors are wanted) and of vectors
    written. Up to `gather_files` of a folder's files are gathered for a transaction
    (`_gather_s`)."""
    searches = precedence or Precedence()  # none: no search to give way to

    async def flush(items: list[ToWriter]) -> None:
        # The first scan's marker is recorded in the index, in the same transaction as what
        # came before it; a later scan's marker only wakes its caller.
        work = [i for i in items if not isinstance(i, ScanDone) or i.token == 0]
        if work and not any(isinstance(i, DocsSubmitted | RemovalAsked) for i in work):
            await searches.give_way()  # the folder's writes wait for a search in flight
        if work:
            started = time.perf_counter()
            try:
                # Not abandoned on cancel: a started transaction always commits or rolls back.
                outcome = await anyio.to_thread.run_sync(apply_batch, writer, work)
            except BaseException as exc:
                if isinstance(exc, anyio.get_cancelled_exc_class()):  # before the thread ran
                    failure: PocketError = Stopping(
                        "the index writer stopped before this write was committed; nothing "
                        "of it was written")
                else:
                    failure = exc if isinstance(exc, PocketError) else StoreError(
                        f"the write was not committed: {exc!r}")
                for item in work:
                    if isinstance(item, DocsSubmitted | RemovalAsked):
                        _answer(item, failure)
                raise
            write_ms = round((time.perf_counter() - started) * 1000, 1)
            for position, item in enumerate(work):
                if isinstance(item, FileChunked):
                    inflight.done(item.doc.rel, item.doc.seq)
                    if backlog is not None:
                        backlog.wake()
                elif isinstance(item, VectorsFound):
                    if backlog is not None:
                        backlog.committed(item.doc_id)
                elif isinstance(item, FileGone):
                    inflight.done(item.rel, item.seq)
                elif isinstance(item, DocsSubmitted | RemovalAsked):
                    _answer(item, outcome.answers.get(position))
            if backlog is not None:  # a new version the provider may take this time
                for event in outcome.events:
                    if "chunks_waiting" in event:
                        backlog.refused.discard(event["doc_id"])
                        if event.get("source") == "tool":  # not a file: nothing else wakes it
                            backlog.wake()
            _count(outcome, stats, write_ms, len(work), on_event)
            if after_commit is not None:
                after_commit()
        for marker in items:
            if isinstance(marker, ScanDone) and on_scan_done is not None:
                on_scan_done(marker)

    pending: list[ToWriter] = []
    since = 0.0  # when the first of `pending` came
    async with inbox:
        try:
            while True:
                try:
                    item = inbox.receive_nowait()
                except anyio.WouldBlock:
                    wait = _gather_s(pending, since, gather_files)
                    if pending and wait <= 0:
                        await flush(pending)
                        pending = []
                        continue
                    try:
                        with anyio.fail_after(wait if pending else None):
                            item = await inbox.receive()
                    except TimeoutError:
                        await flush(pending)
                        pending = []
                        continue
                    except anyio.EndOfStream:
                        break
                except anyio.EndOfStream:
                    break
                if not pending:
                    since = time.perf_counter()
                pending.append(item)
                if len(pending) >= batch_files or isinstance(item, ScanDone):
                    await flush(pending)
                    pending = []
            if pending:
                await flush(pending)
                pending = []
        finally:
            # Leaving early (a failure, or cancellation): every request still here is
            # answered before the inbox closes, so no caller waits for a commit that will not
            # come. Nothing can arrive meanwhile: this runs without a checkpoint.
            _answer_stranded(pending, inbox)


def _gather_s(pending: Sequence[ToWriter], since: float, most: int) -> float:
    """How long to wait for more before committing `pending`: up to `most` of a folder's
    files, chunked one after another, are gathered for up to GATHER_S into one transaction (a
    commit costs about as much CPU as writing a short note); a tool's request goes at once."""
    if not pending or len(pending) >= most or any(
            isinstance(i, DocsSubmitted | RemovalAsked | ScanDone) for i in pending):
        return 0.0
    return GATHER_S - (time.perf_counter() - since)


def _answer_stranded(pending: list[ToWriter],
                     inbox: MemoryObjectReceiveStream[ToWriter]) -> None:
    stranded = [i for i in pending if isinstance(i, DocsSubmitted | RemovalAsked)]
    while True:
        try:
            item = inbox.receive_nowait()
        except (anyio.WouldBlock, anyio.EndOfStream, anyio.ClosedResourceError):
            break
        if isinstance(item, DocsSubmitted | RemovalAsked):
            stranded.append(item)
    for request in stranded:
        _answer(request, Stopping("the index writer stopped before this write was "
                                  "committed; nothing of it was written"))


def _count(outcome: Outcome, stats: Stats, write_ms: float, batch: int,
           on_event: EventHook | None) -> None:
    for event in outcome.events:
        kind = event["event"]
        if event.get("source") != "tool":
            if kind == "inserted":
                stats.added += 1
            elif kind == "updated":
                stats.updated += 1  # written again, if only because asked (a force)
                if event.get("status") == "unchanged":
                    stats.rechecked += 1  # of those, re-read by force with the same text
            elif kind == "deleted" and not event.get("skipped"):  # skipped: counted then
                stats.removed += 1
            elif kind == "skipped" and event.get("error"):
                stats.skip(event["path"], event["reason"])
            if kind == "embedded":
                stats.chunks_vectors += event["chunks"]
            elif kind != "skipped":
                stats.chunks_written += event.get("chunks", 0)
                stats.chunks_removed += event.get("chunks_removed", 0)
            if "chunks_waiting" in event:  # written for keywords: some vectors reused
                stats.chunks_reused += event["chunks_reused"]
                stats.chunks_vectors += event["chunks_reused"]
        event["write_ms"] = write_ms
        event["batch"] = batch
        event["commit"] = outcome.commit
        if on_event is not None:
            on_event(event)


class WriterActor:
    """THE writer of one index: its store writer (the lock and only writing
    connection) and its inbox. Feeds send on clones of `feed()`; tools use `requests`."""

    def __init__(self, writer: StoreWriter, *, queue_size: int, batch_files: int,
                 on_event: EventHook | None = None) -> None:
        self._writer = writer
        self.where = writer.where
        self.batch_files = batch_files
        self.on_event = on_event
        self._queue_size = queue_size
        self._send, self._inbox = anyio.create_memory_object_stream[ToWriter](queue_size)
        self.requests = WriterInbox(self._send, self.where)
        self._repairing = False

    def keep_removed(self, seconds: float, most: int) -> None:
        """How long, and how many, vectors of removed chunks are kept for reuse."""
        self._writer.keep_removed(seconds, most)

    async def record_scan(self, state: str) -> None:
        """Record in the index how far its first scan has come ("running", "done"), before
        `run` (a worker thread: it writes)."""
        await anyio.to_thread.run_sync(self._writer.record_scan, state)

    async def record_folder(self, folder: FolderRecord) -> None:
        """Record in the index the folder it is fed from, before `run`."""
        await anyio.to_thread.run_sync(self._writer.record_folder, folder)

    def feed(self) -> MemoryObjectSendStream[ToWriter]:
        """A send end for a feed (the embedder); it closes it when it is done."""
        return self._send.clone()

    def view(self) -> View:
        """A small reader of this index (what the pipeline checks files against)."""
        return self._writer.view()

    @property
    def ended(self) -> bool:
        """Whether the actor has stopped taking what is sent to it (its run returned or
        failed)."""
        return self._send.statistics().open_receive_streams == 0

    def depth(self) -> dict[str, int]:
        return depth(self._send)

    async def run(self, *, inflight: InFlight, stats: Stats,
                  on_scan_done: Callable[[ScanDone], None] | None = None,
                  backlog: Backlog | None = None,
                  precedence: Precedence | None = None) -> None:
        """Commit what arrives until the feeds and `requests` are all closed. Meanwhile a
        background thread brings the index's vector file up to date and checks it; once the
        inbox is closed that is awaited, unless `stop_repair` was called."""
        try:
            async with anyio.create_task_group() as tg:
                def repair_if_needed() -> None:
                    if self._writer.wants_repair and not self._repairing:
                        self._repairing = True
                        tg.start_soon(self._repair, name="pocketmcp.writer.vectors")

                repair_if_needed()
                await write_index(self._inbox, writer=self._writer, inflight=inflight,
                                  stats=stats, batch_files=self.batch_files,
                                  on_event=self.on_event, on_scan_done=on_scan_done,
                                  after_commit=repair_if_needed, backlog=backlog,
                                  # No more held than the inbox holds: files in flight stay
                                  # bounded by the queues.
                                  gather_files=min(self.batch_files, self._queue_size),
                                  precedence=precedence)
        except BaseExceptionGroup as group:  # a failed transaction, as callers expect it
            raise single(group) from None

    async def _repair(self) -> None:
        try:
            # Abandoned on cancel: closing the writer stops the thread and waits for it.
            await anyio.to_thread.run_sync(self._writer.repair_vectors, abandon_on_cancel=True)
        finally:
            self._repairing = False

    def stop_repair(self) -> None:
        """Stop the vector file's repair soon (the next start takes it up again)."""
        self._writer.stop_repair()

    def close_file(self) -> None:
        """Checkpoint, close the connection and release the lock, once `run` has returned
        (blocking: may run in a worker thread)."""
        self._writer.close()

    def close(self) -> None:
        """Close the inbox (on the event loop) and the file."""
        self._send.close()
        self._inbox.close()
        self._writer.close()


class WriterInbox:
    """How a tool reaches the writer of one index: send a request, await its commit."""

    def __init__(self, send: MemoryObjectSendStream[ToWriter], where: str) -> None:
        self._send = send
        self.where = where

    async def store(self, docs: Sequence[PreparedDoc]) -> list[Written]:
        """Write these documents, all in one transaction."""
        answer = await self._ask(lambda reply: DocsSubmitted(tuple(docs), reply))
        assert isinstance(answer, list)
        return answer

    async def remove(self, doc_ids: Sequence[int], external_ids: Sequence[str]) -> Removed:
        answer = await self._ask(lambda reply: RemovalAsked(tuple(doc_ids), tuple(external_ids),
                                                            reply))
        assert isinstance(answer, Removed)
        return answer

    async def _ask(self, make: Callable[[MemoryObjectSendStream[object]], ToWriter]) -> object:
        reply_tx, reply_rx = anyio.create_memory_object_stream[object](1)
        with reply_rx:
            sent = False
            try:
                async with self._send.clone() as send:
                    await send.send(make(reply_tx))
                sent = True  # the reply's send end is the writer's now
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                raise Stopping(f"the writer of {self.where} has stopped; nothing was "
                               "written") from None
            finally:
                if not sent:
                    reply_tx.close()
            try:
                answer = await reply_rx.receive()
            except anyio.EndOfStream:
                raise Stopping(f"the writer of {self.where} stopped before this write was "
                               "committed") from None
        if isinstance(answer, BaseException):
            raise answer
        return answer

    def close(self) -> None:
        """No new requests: the writer finishes what it has and stops."""
        self._send.close()
