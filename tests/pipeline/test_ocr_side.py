"""Files that may need OCR are converted beside the others, by a fixed number of workers: a
folder full of scans does not become as many waiting tasks, and a scan whose size and mtime
match the index is a stat that never waits for OCR."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import anyio
import pytest

from pocketmcp.convert.kinds import Converted
from pocketmcp.convert.pool import Converter
from pocketmcp.core.paths import watched_id
from pocketmcp.messages import Event, FileHashed, FileSeen, Hashed, ScanDone
from pocketmcp.pipeline.hasher import OCR_SIDE_WORKERS, Hasher, hash_files
from pocketmcp.pipeline.state import InFlight, Stats
from pocketmcp.store.api import View
from pocketmcp.store.rows import DocState

pytestmark = pytest.mark.timeout(60)
READERS = 2


class _SlowOcr:
    """Converts scans only once `gate` is set, as OCR on a busy machine would take its time."""

    def __init__(self) -> None:
        self.gate = anyio.Event()
        self.converting = 0

    def may_ocr(self, kind: str | None) -> bool:
        return kind in ("image", "pdf")

    async def convert(self, kind: str, data: bytes, name: str, digest: str) -> Converted:
        self.converting += 1
        await self.gate.wait()
        return Converted(text=f"Text read from {name}.")


class _Reader:
    def __init__(self, known: dict[str, DocState]) -> None:
        self.known = known

    def doc_state(self, doc_id: str) -> DocState | None:
        return self.known.get(doc_id)


class _View:
    def __init__(self, known: dict[str, DocState]) -> None:
        self.reader = _Reader(known)

    async def run(self, fn: Callable[[Any], Any]) -> Any:
        return fn(self.reader)

    def close(self) -> None:
        pass


async def _until(check: Callable[[], bool]) -> None:
    with anyio.fail_after(20):
        while not check():  # noqa: ASYNC110 - counters of the code under test, polled
            await anyio.sleep(0.01)


async def test_scans_waiting_for_ocr_are_bounded_and_unchanged_scans_do_not_wait(
        tmp_path: Path) -> None:
    scans = [f"scan-{i:02}.png" for i in range(20)]
    for rel in scans:
        (tmp_path / rel).write_bytes(b"\x89PNG" + rel.encode())
    (tmp_path / "old.pdf").write_bytes(b"%PDF-1.4 already indexed")
    (tmp_path / "note.md").write_text("# Note\n\nWater the plants.\n")
    st = os.stat(tmp_path / "old.pdf")
    known = {watched_id("old.pdf"): DocState("0" * 64, st.st_size, st.st_mtime_ns, "default")}
    ocr = _SlowOcr()
    stats = Stats()
    hasher = Hasher(root=tmp_path, view=cast(View, _View(known)), inflight=InFlight(),
                    stats=stats, max_bytes=1 << 20, converter=cast(Converter, ocr))
    events_tx, events_rx = anyio.create_memory_object_stream[Event](0)
    out_tx, out_rx = anyio.create_memory_object_stream[Hashed](100)
    sent: list[str] = []
    out: list[Hashed] = []

    async def feed(rels: list[str]) -> None:
        for rel in rels:
            await events_tx.send(FileSeen(rel))
            sent.append(rel)

    async with out_rx, anyio.create_task_group() as tg:
        tg.start_soon(lambda: hash_files(events_rx, out_tx, hasher=hasher,
                                         concurrency=READERS))
        # Two scans keep both OCR-side workers busy; an unchanged scan and a note come next.
        await feed([*scans[:OCR_SIDE_WORKERS], "old.pdf", "note.md"])
        await _until(lambda: ocr.converting == OCR_SIDE_WORKERS)
        await _until(lambda: stats.unchanged == 1)  # a stat, not a wait behind OCR
        with anyio.fail_after(20):
            first = await out_rx.receive()
        assert isinstance(first, FileHashed) and first.rel == "note.md"

        # The rest of the scans: the hasher takes in only as many as it can hold, and the
        # folder's walk waits instead of turning each scan into a task waiting for OCR.
        tg.start_soon(feed, scans[OCR_SIDE_WORKERS:])
        await _until(lambda: len(sent) >= 4 + READERS)
        await anyio.sleep(0.5)
        assert ocr.converting == OCR_SIDE_WORKERS
        taken = len(sent) - 4
        assert taken <= READERS + 1, (taken, len(scans))
        assert hasher._busy <= OCR_SIDE_WORKERS + READERS

        ocr.gate.set()
        await _until(lambda: len(sent) == len(scans) + 2)
        await events_tx.send(ScanDone(files=len(scans) + 2))
        await events_tx.aclose()
        with anyio.fail_after(20):
            out.extend([message async for message in out_rx])
    # ScanDone comes after every file received before it; every scan is converted once.
    assert isinstance(out[-1], ScanDone)
    rels = sorted(m.rel for m in out if isinstance(m, FileHashed))
    assert rels == scans
    assert ocr.converting == len(scans)
