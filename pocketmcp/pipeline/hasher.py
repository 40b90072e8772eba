"""Reads files, skips the unchanged, and turns the rest into FileHashed facts."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path

import anyio
import msgspec
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from pocketmcp import logs
from pocketmcp.convert import kinds
from pocketmcp.convert.pool import Converter
from pocketmcp.core import dates
from pocketmcp.core.notes import converted_facts
from pocketmcp.core.paths import watched_id
from pocketmcp.core.text import clean, title_of
from pocketmcp.errors import DocumentError
from pocketmcp.messages import (
    Event,
    FileGone,
    FileHashed,
    FileSeen,
    FileTouched,
    Hashed,
    ScanDone,
)
from pocketmcp.pipeline.looking import Ask, Looked, look_at
from pocketmcp.pipeline.precedence import Precedence
from pocketmcp.pipeline.state import GONE, InFlight, Stats
from pocketmcp.store.api import Known, View
from pocketmcp.store.rows import DocState

log = logs.get("pocketmcp.hasher")


class _ToConvert(msgspec.Struct, frozen=True):
    """A file read and found changed, whose format must be converted to text."""

    rel: str
    kind: str
    size: int
    mtime_ns: int
    data: bytes
    sha256: str
    library: str
    edit: bool


OCR_SIDE_WORKERS = 2  # files converted beside the others when they may need OCR
# Files waiting together (a scan) looked at in one worker-thread step, at most: one hop off
# the event loop, which searches share, for several files.
LOOK_FILES = 16


class Hasher:
    def __init__(self, *, root: Path, view: View, inflight: InFlight, stats: Stats,
                 max_bytes: int, converter: Converter,
                 library_of: Callable[[str], str] = lambda rel: "default",
                 force: bool = False, group: int = LOOK_FILES,
                 precedence: Precedence | None = None) -> None:
        self.root = root
        self.converter = converter
        self.library_of = library_of
        self.view = view
        self.inflight = inflight
        self.stats = stats
        self.max_bytes = max_bytes
        self.force = force
        self.precedence = precedence or Precedence()  # none: no search to give way to
        self.group = max(1, group)  # files looked at in one step, at most
        self._turns: dict[str, deque[anyio.Event]] = {}  # per path, in arrival order
        # Files to convert that may need OCR are handed over here to OCR_SIDE_WORKERS
        # workers (set by hash_files; None: converted in turn with the others).
        self.aside: MemoryObjectSendStream[_ToConvert] | None = None
        self._busy = 0
        self._idle = anyio.Event()

    def _library_changed(self, known: DocState | None, library: str) -> bool:
        return known is not None and known.library not in ("", library)

    async def _look_all(self, events: Sequence[FileSeen | FileGone]
                        ) -> list[tuple[Ask, Looked]]:
        """The index's state of each file (files in flight first) and, for a file seen, what
        it holds now: one worker-thread step for the whole group, the index's lookups
        included (each step off the event loop costs it, and searches share the loop)."""
        asks = []
        for event in events:
            rel = event.rel
            seen = isinstance(event, FileSeen)
            pending = self.inflight.get(rel)
            asks.append(Ask(
                rel=rel, seen=seen, unsupported=kinds.refused_by_name(rel) if seen else None,
                forced=self.force or (isinstance(event, FileSeen) and event.force),
                library=self.library_of(rel), kind=kinds.kind_of(rel),
                stored=pending is None,
                known=None if pending in (None, GONE) else DocState(pending, None, None, "")))

        def look_all(reader: Known | None) -> list[Looked]:
            out = []
            for ask in asks:
                known = reader.doc_state(watched_id(ask.rel)) if (
                    ask.stored and reader is not None) else ask.known
                # A file whose library changed (LIBRARY, a moved folder) is written again.
                force = ask.forced or self._library_changed(known, ask.library)
                try:
                    out.append(look_at(ask.rel, self.root / ask.rel, self.max_bytes, known, force,
                                     ask.kind, ask.unsupported, ask.seen))
                except OSError as exc:  # a value: the index's connection stays in use
                    out.append(Looked(known, None, force, failure=exc))
            return out

        if not any(ask.stored for ask in asks):  # all in flight: the index is not asked
            looked = await anyio.to_thread.run_sync(look_all, None)
        else:
            looked = await self.view.run(look_all)
        return list(zip(asks, looked, strict=True))

    async def _check_all(self, events: Sequence[FileSeen | FileGone]
                         ) -> list[Hashed | _ToConvert | None]:
        """Everything short of converting, for each file: stat, read, compare with the index;
        a file whose format must be converted comes back as a _ToConvert."""
        return [self._checked(ask, looked) for ask, looked in await self._look_all(events)]

    def _checked(self, ask: Ask, looked: Looked) -> Hashed | _ToConvert | None:
        rel, library, kind = ask.rel, ask.library, ask.kind
        if looked.failure is not None:
            exc = looked.failure
            self.stats.skip(rel, f"unreadable: {exc.strerror or exc}")
            log.warning("skipped", path=rel, reason=f"unreadable: {exc}")
            return None
        known, read, force = looked.known, looked.read, looked.force
        if read is None or read.problem is not None:
            if read is not None:
                self.stats.skip(rel, read.problem or "not indexed")
                log.warning("skipped", path=rel, reason=read.problem, size=read.size)
            if known is None:
                return None
            # A file still there but no longer indexable is counted once, as skipped.
            return FileGone(rel, self.inflight.begin(rel, GONE), skipped=read is not None)
        if read.data is None or looked.text is None:
            self.stats.unchanged += 1
            return None
        digest = looked.text.sha256
        if known is not None and known.sha256 == digest and not force:
            self.stats.unchanged += 1
            return FileTouched(rel, read.size, read.mtime_ns)
        if kind in kinds.CONVERTED:
            return _ToConvert(rel, kind, read.size, read.mtime_ns, read.data, digest,
                              library, known is not None)
        text, note = looked.text.text, looked.text.note
        assert note is not None
        if not looked.text.exact:
            log.warning("decoded_with_replacement", path=rel,
                        reason="invalid UTF-8 bytes were replaced with U+FFFD")
        if note.problem is not None:
            log.warning("front_matter_skipped", path=rel, reason=note.problem)
        for field, why in note.dropped:
            log.warning("front_matter_field_dropped", path=rel, field=field, reason=why)
        return FileHashed(
            rel=rel, seq=self.inflight.begin(rel, digest), uri=looked.text.uri,
            title=looked.text.title, text=text, sha256=digest,
            size=read.size, mtime_ns=read.mtime_ns, library=library, facts=note.facts,
            edit=known is not None,
        )

    async def _convert(self, job: _ToConvert) -> Hashed | None:
        rel = job.rel
        try:
            converted = await self.converter.convert(job.kind, job.data, rel, job.sha256)
        except DocumentError as exc:
            self.stats.skip(rel, exc.reason)
            log.warning("skipped", path=rel, reason=exc.reason, size=job.size)
            return FileGone(rel, self.inflight.begin(rel, GONE), skipped=True) if job.edit \
                else None
        text = clean(converted.text)
        if not text.strip():  # indexed without chunks: found by nothing, read again by nothing
            self.stats.no_text += 1
            log.info("no_text_found", path=rel, kind=job.kind)
        facts = converted_facts(converted.properties, dates.from_ns(job.mtime_ns))
        return FileHashed(
            rel=rel, seq=self.inflight.begin(rel, job.sha256), uri=(self.root / rel).as_uri(),
            title=converted.title or title_of(text, Path(rel).stem), text=text,
            sha256=job.sha256, size=job.size, mtime_ns=job.mtime_ns, library=job.library,
            facts=facts, edit=job.edit,
        )

    async def work(self, inbox: MemoryObjectReceiveStream[Event],
                   outbox: MemoryObjectSendStream[Hashed]) -> None:
        """Take the files waiting in `inbox`, up to `group` at a time, and send each on.
        A file's events keep their order: each takes its turn on its path as it is received,
        and waits for the events of that path received before it."""
        carried: Event | None = None  # received last time, the start of the next group
        async with inbox, outbox:
            while True:
                if carried is None:
                    try:
                        carried = await inbox.receive()
                    except anyio.EndOfStream:
                        return
                    if not isinstance(carried, ScanDone):
                        turn = self._take_turn(carried.rel)
                first, carried = carried, None
                if isinstance(first, ScanDone):
                    # In band: wait until every file received before it has been sent on.
                    while self._busy:
                        await self._idle.wait()
                    await outbox.send(first)
                    continue
                group = [(first, turn)]
                rels = {first.rel}
                while len(group) < self.group:  # the files waiting now, without waiting
                    try:
                        more = inbox.receive_nowait()
                    except (anyio.WouldBlock, anyio.EndOfStream):
                        break
                    if not isinstance(more, ScanDone):
                        more_turn = self._take_turn(more.rel)
                        if more.rel not in rels:
                            group.append((more, more_turn))
                            rels.add(more.rel)
                            continue
                        turn = more_turn
                    carried = more  # after this group: a marker, or the path's next event
                    break
                await self._work_on(group, outbox)

    async def _work_on(self, group: list[tuple[FileSeen | FileGone, anyio.Event]],
                       outbox: MemoryObjectSendStream[Hashed]) -> None:
        """One group of files, of as many paths: one worker-thread step for all, then each
        sent on (or handed to an OCR-side worker) in turn."""
        settled: set[str] = set()  # paths whose turn has ended, or an OCR-side worker ends
        events = [event for event, _ in group]
        try:
            for _, turn in group:  # waits only for events received before this group
                await turn.wait()
            await self.precedence.give_way()  # a search in flight goes first
            steps = await self._check_all(events)
            for event, step in zip(events, steps, strict=True):
                if isinstance(step, _ToConvert) and self.aside is not None \
                        and self.converter.may_ocr(step.kind):
                    # OCR takes seconds a file and runs one file at a time: such files wait
                    # for it beside the others, so text files go on meanwhile. The hand-over
                    # waits while both OCR-side workers are busy, so files waiting for OCR are
                    # bounded, not the whole folder.
                    await self.aside.send(step)
                    settled.add(event.rel)  # the OCR-side worker ends the path's turn
                    continue
                out = await self._convert(step) if isinstance(step, _ToConvert) else step
                if out is not None:
                    await outbox.send(out)
                settled.add(event.rel)
                self._finished(event.rel)
        finally:
            for event, turn in group:
                if event.rel not in settled:
                    self._finished(event.rel, turn)

    async def beside(self, jobs: MemoryObjectReceiveStream[_ToConvert],
                     outbox: MemoryObjectSendStream[Hashed]) -> None:
        """An OCR-side worker: converts the files handed over by work(), one at a time."""
        async with jobs, outbox:
            async for job in jobs:
                try:
                    out = await self._convert(job)
                    if out is not None:
                        await outbox.send(out)
                finally:
                    self._finished(job.rel)

    def _finished(self, rel: str, turn: anyio.Event | None = None) -> None:
        self._end_turn(rel, turn)
        self._busy -= 1
        if not self._busy:
            self._idle.set()
            self._idle = anyio.Event()

    def _take_turn(self, rel: str) -> anyio.Event:
        """A turn on `rel` for an event just received, set once those of the same path
        received before it are done; the event counts as in progress from now."""
        self._busy += 1
        turns = self._turns.setdefault(rel, deque())
        turn = anyio.Event()
        if not turns:
            turn.set()
        turns.append(turn)
        return turn

    def _end_turn(self, rel: str, turn: anyio.Event | None = None) -> None:
        """End the path's current turn, or `turn` (an event given up before its turn came:
        a stop, or a failure)."""
        turns = self._turns[rel]
        if turn is not None and turn is not turns[0]:
            turns.remove(turn)
            return
        turns.popleft()
        if turns:
            turns[0].set()
        else:
            del self._turns[rel]


async def hash_files(
    inbox: MemoryObjectReceiveStream[Event], outbox: MemoryObjectSendStream[Hashed], *,
    hasher: Hasher, concurrency: int,
) -> None:
    """`concurrency` workers share the inbox; per-file order is kept by per-path locks.

    Files that may need OCR are converted by OCR_SIDE_WORKERS workers beside them, handed
    over through an unbuffered stream: at most that many are converted and `concurrency`
    wait to be, however many such files the folder holds."""
    async with inbox, outbox, anyio.create_task_group() as tg:
        aside_tx, aside_rx = anyio.create_memory_object_stream[_ToConvert](0)
        async with aside_rx:
            for i in range(OCR_SIDE_WORKERS):
                tg.start_soon(hasher.beside, aside_rx.clone(), outbox.clone(),
                              name=f"pocketmcp.hasher.ocr.{i}")
        hasher.aside = aside_tx
        # The OCR-side workers end once every reader has and the stream is closed.
        async with aside_tx, anyio.create_task_group() as readers:
            for i in range(concurrency):
                readers.start_soon(hasher.work, inbox.clone(), outbox.clone(),
                                   name=f"pocketmcp.hasher.{i}")
