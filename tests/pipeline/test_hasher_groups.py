"""Files waiting together are looked at in groups, one worker-thread step (and one use of the
index's view) per group, and a file's events still keep their order; a scan's marker still
comes after every file received before it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import anyio
import pytest

from pocketmcp.convert.pool import Converter
from pocketmcp.messages import Event, FileGone, FileHashed, FileSeen, FileTouched, Hashed, ScanDone
from pocketmcp.pipeline.hasher import LOOK_FILES, Hasher, hash_files
from pocketmcp.pipeline.state import InFlight, Stats
from pocketmcp.store.api import View
from pocketmcp.store.rows import DocState

pytestmark = pytest.mark.timeout(60)


class _Reader:
    def doc_state(self, doc_id: str) -> DocState | None:
        return None  # a new folder: the index holds none of its files


class _CountingView:
    """The index's view, counting the worker-thread steps taken through it."""

    def __init__(self) -> None:
        self.steps = 0

    async def run(self, fn: Callable[[Any], Any]) -> Any:
        self.steps += 1
        return await anyio.to_thread.run_sync(fn, _Reader())

    def close(self) -> None:
        pass


async def _hash(tmp_path: Path, events: list[Event], concurrency: int
                ) -> tuple[list[Hashed], _CountingView]:
    view = _CountingView()
    hasher = Hasher(root=tmp_path, view=cast(View, view), inflight=InFlight(), stats=Stats(),
                    max_bytes=1 << 20, converter=cast(Converter, object()))
    events_tx, events_rx = anyio.create_memory_object_stream[Event](len(events))
    out_tx, out_rx = anyio.create_memory_object_stream[Hashed](len(events))
    for event in events:  # all waiting before the hasher starts, as in a scan
        events_tx.send_nowait(event)
    events_tx.close()
    with anyio.fail_after(30):
        async with out_rx:
            await hash_files(events_rx, out_tx, hasher=hasher, concurrency=concurrency)
            return [message async for message in out_rx], view


@pytest.mark.parametrize("concurrency", [1, 3])
async def test_files_waiting_together_take_one_step_a_group_and_keep_their_order(
        tmp_path: Path, concurrency: int) -> None:
    names = [f"n{i:03}.md" for i in range(3 * LOOK_FILES)]
    for i, name in enumerate(names):
        (tmp_path / name).write_text(f"# Note {i}\n\nThe kettle note number {i}.\n")
    first, later = names[:2 * LOOK_FILES], names[2 * LOOK_FILES:]
    # The same file again (a second save): its second reading must come after its first.
    events: list[Event] = [FileSeen(n) for n in first[:5]] + [FileSeen(first[2])]
    events += [FileSeen(n) for n in first[5:]] + [ScanDone(files=len(first))]
    events += [FileSeen(n) for n in later]
    out, view = await _hash(tmp_path, events, concurrency)

    # One step a group, not one a file: 3 groups at least, and far fewer than 49 steps.
    files = len(names) + 1
    assert view.steps <= files // 4, (view.steps, files)
    hashed = [m.rel for m in out if isinstance(m, FileHashed)]
    assert sorted(hashed) == names  # each file once, whatever worker took it
    # The second reading of the same content: touched, after its first reading was sent.
    touched = [i for i, m in enumerate(out) if isinstance(m, FileTouched)]
    assert [out[i].rel for i in touched] == [first[2]]
    assert touched[0] > hashed.index(first[2])
    # The marker: after every file received before it.
    marker = next(i for i, m in enumerate(out) if isinstance(m, ScanDone))
    before = {m.rel for m in out[:marker] if not isinstance(m, ScanDone)}
    assert set(first) <= before


async def test_a_files_events_keep_their_order_across_groups_and_workers(
        tmp_path: Path) -> None:
    """A file seen, then gone, then seen again, each event in a different group: the
    readings come out in that order, however the workers share the groups."""
    names = [f"n{i:03}.md" for i in range(2 * LOOK_FILES)]
    for name in names:
        (tmp_path / name).write_text(f"# {name}\n\nText of {name}.\n")
    target = names[0]
    events: list[Event] = [FileSeen(target)]
    events += [FileSeen(n) for n in names[1:LOOK_FILES]]
    events += [FileGone(target)] + [FileSeen(n) for n in names[LOOK_FILES:]]
    events += [FileSeen(target, force=True)]
    out, _ = await _hash(tmp_path, events, 3)
    mine = [type(m).__name__ for m in out if getattr(m, "rel", None) == target]
    assert mine == ["FileHashed", "FileGone", "FileHashed"], mine
