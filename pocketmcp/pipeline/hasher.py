"""Reads files, skips the unchanged, and turns the rest into FileHashed facts."""

from __future__ import annotations

import os
import posixpath
import stat
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
from pocketmcp.core.notes import Note, converted_facts, read_note
from pocketmcp.core.paths import watched_id
from pocketmcp.core.precedence import SEARCHES
from pocketmcp.core.text import clean, decode, looks_binary, sha256, title_of
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
from pocketmcp.pipeline.state import GONE, InFlight, Stats
from pocketmcp.store.api import Reader, View
from pocketmcp.store.rows import DocState

log = logs.get("pocketmcp.hasher")


class _Read(msgspec.Struct, frozen=True):
    size: int
    mtime_ns: int
    data: bytes | None  # None: the stat matched the index, content not read
    problem: str | None = None


def _read(path: Path, max_bytes: int, known: DocState | None, force: bool,
          kind: str | None) -> _Read | None:
    """Stat and read one file (blocking). None when it is not a regular file any more.

    `kind` is the file's format by name (None: unknown, read if its content is text)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    if st.st_size > max_bytes:
        return _Read(st.st_size, st.st_mtime_ns, None,
                     f"larger than the limit of {max_bytes} bytes")
    if not force and known is not None and (known.size, known.mtime_ns) == (
        st.st_size, st.st_mtime_ns
    ):
        return _Read(st.st_size, st.st_mtime_ns, None)
    with open(path, "rb") as handle:
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        return _Read(len(data), st.st_mtime_ns, None,
                     f"larger than the limit of {max_bytes} bytes")
    if kind not in kinds.CONVERTED and looks_binary(data):
        problem = "binary content" if kind else kinds.refused_binary(path.name)
        return _Read(len(data), st.st_mtime_ns, None, problem)
    return _Read(len(data), st.st_mtime_ns, data)


class _Text(msgspec.Struct, frozen=True):
    """A text file read and found changed: its digest, text and what it says of itself."""

    sha256: str
    text: str
    exact: bool  # decoded without replacement
    note: Note | None  # None: the index holds this very content (not worked out)
    title: str = ""
    uri: str = ""


class _Looked(msgspec.Struct, frozen=True):
    """One file as the index knows it and as it is on disk, worked out in one worker thread
    (one hop off the event loop per file: the loop is shared with searches)."""

    known: DocState | None
    read: _Read | None
    force: bool  # written again whatever its digest (asked, or its library changed)
    text: _Text | None = None
    failure: OSError | None = None  # the file could not be read


def _look(rel: str, path: Path, max_bytes: int, known: DocState | None, force: bool,
          kind: str | None, unsupported: str | None, seen: bool) -> _Looked:
    """Stat, read and hash one file and, if it is text that changed, decode it and read its
    note (blocking). `force` as _check decides it, given `known`."""
    if not seen:
        return _Looked(known, None, force)
    read = _Read(0, 0, None, unsupported) if unsupported else _read(
        path, max_bytes, known, force, kind)
    if read is None or read.problem is not None or read.data is None:
        return _Looked(known, read, force)
    digest = sha256(read.data)
    if (known is not None and known.sha256 == digest and not force) or (
            kind in kinds.CONVERTED):
        return _Looked(known, read, force, _Text(digest, "", True, None))
    text, exact = decode(read.data)
    text = clean(text)
    note = read_note(text, folder=posixpath.dirname(rel), modified=dates.from_ns(read.mtime_ns))
    return _Looked(known, read, force, _Text(digest, text, exact, note,
                                      note.title or title_of(text, Path(rel).stem),
                                      path.as_uri()))


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
GROUP_FILES = 16


class Hasher:
    def __init__(self, *, root: Path, view: View, inflight: InFlight, stats: Stats,
                 max_bytes: int, converter: Converter,
                 library_of: Callable[[str], str] = lambda rel: "default",
                 force: bool = False) -> None:
        self.root = root
        self.converter = converter
        self.library_of = library_of
        self.view = view
        self.inflight = inflight
        self.stats = stats
        self.max_bytes = max_bytes
        self.force = force
        self._turns: dict[str, deque[anyio.Event]] = {}  # per path, in arrival order
        # Files to convert that may need OCR are handed over here to OCR_SIDE_WORKERS
        # workers (set by hash_files; None: converted in turn with the others).
        self.aside: MemoryObjectSendStream[_ToConvert] | None = None
        self._busy = 0
        self._idle = anyio.Event()

    def _library_changed(self, known: DocState | None, library: str) -> bool:
        return known is not None and known.library not in ("", library)

    async def _look_all(self, events: Sequence[FileSeen | FileGone]) -> list[_Looked]:
        """The index's state of each file (files in flight first) and, for a file seen, what
        it holds now: one worker-thread step for the whole group, the index's lookups
        included (each step off the event loop costs it, and searches share the loop)."""
        asks = []
        for event in events:
            rel = event.rel
            seen = isinstance(event, FileSeen)
            forced = self.force or (isinstance(event, FileSeen) and event.force)
            pending = self.inflight.get(rel)
            known = None if pending in (None, GONE) else DocState(pending, None, None, "")
            asks.append((rel, seen, kinds.refused_by_name(rel) if seen else None, forced,
                         self.library_of(rel), kinds.kind_of(rel), pending is None, known))

        def look(reader: Reader | None) -> list[_Looked]:
            out = []
            for rel, seen, unsupported, forced, library, kind, stored, known in asks:
                if stored and reader is not None:
                    known = reader.doc_state(watched_id(rel))
                # A file whose library changed (LIBRARY_FROM, a moved folder) is written again.
                force = forced or self._library_changed(known, library)
                try:
                    out.append(_look(rel, self.root / rel, self.max_bytes, known, force, kind,
                                     unsupported, seen))
                except OSError as exc:  # a value: the index's connection stays in use
                    out.append(_Looked(known, None, force, failure=exc))
            return out

        if not any(ask[6] for ask in asks):  # all in flight: the index is not asked
            return await anyio.to_thread.run_sync(look, None)
        return await self.view.run(look)

    async def _check_all(self, events: Sequence[FileSeen | FileGone]
                         ) -> list[Hashed | _ToConvert | None]:
        """Everything short of converting, for each file: stat, read, compare with the index;
        a file whose format must be converted comes back as a _ToConvert."""
        looked = await self._look_all(events)
        return [self._checked(event, one) for event, one in zip(events, looked, strict=True)]

    def _checked(self, event: FileSeen | FileGone, looked: _Looked
                 ) -> Hashed | _ToConvert | None:
        rel = event.rel
        library = self.library_of(rel)
        kind = kinds.kind_of(rel)
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
        facts = converted_facts(converted.properties, dates.from_ns(job.mtime_ns))
        return FileHashed(
            rel=rel, seq=self.inflight.begin(rel, job.sha256), uri=(self.root / rel).as_uri(),
            title=converted.title or title_of(text, Path(rel).stem), text=text,
            sha256=job.sha256, size=job.size, mtime_ns=job.mtime_ns, library=job.library,
            facts=facts, edit=job.edit,
        )

    async def work(self, inbox: MemoryObjectReceiveStream[Event],
                   outbox: MemoryObjectSendStream[Hashed]) -> None:
        """Take the files waiting in `inbox`, up to GROUP_FILES at a time, and send each on.
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
                while len(group) < GROUP_FILES:  # the files waiting now, without waiting
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
            await SEARCHES.give_way()  # a search in flight goes first
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
            for event in events:
                if event.rel not in settled:
                    self._finished(event.rel)

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

    def _finished(self, rel: str) -> None:
        self._end_turn(rel)
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

    def _end_turn(self, rel: str) -> None:
        turns = self._turns[rel]
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
