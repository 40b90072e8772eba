"""The writer actor: the one writer of an index file, for file changes and tool requests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import numpy as np
import pytest
from support.runtime import fake, make_config, running
from support.tools import Tools

from pocketmcp.core.identity import Identity
from pocketmcp.core.text import sha256
from pocketmcp.errors import InvalidRequest, PocketError, Stopping, StoreError
from pocketmcp.messages import Chunk, DocRecord, PreparedDoc
from pocketmcp.pipeline.state import InFlight, Stats
from pocketmcp.pipeline.writer import WriterActor
from pocketmcp.plans import serving
from pocketmcp.store.filters import DocFilter
from pocketmcp.store.sqlite.queries import SqliteReader
from pocketmcp.store.sqlite.writes import SqliteWriter

DIM = 64
IDENTITY = Identity(model="m", dim=DIM)


def prepared(name: str, text: str) -> PreparedDoc:
    rng = np.random.default_rng(len(text))
    vector = rng.normal(size=DIM).astype(np.float32)
    vector /= np.linalg.norm(vector)
    chunk = Chunk(idx=0, start=0, end=len(text), text=text, tokens=8, sha256=sha256(text))
    record = DocRecord(external_id=name, source="raw", uri=None, title=name, content=text,
                       sha256=sha256(text))
    return PreparedDoc(record, (chunk,), vector.tobytes())


def stored(db: Path, external_id: str) -> bool:
    reader = SqliteReader(db)
    try:
        return reader.document_by_external(external_id) is not None
    finally:
        reader.close()


async def test_a_request_is_answered_after_its_commit_and_sees_it_stored(tmp_path: Path) -> None:
    db = tmp_path / "index.db"
    events: list[dict[str, Any]] = []
    actor = WriterActor(SqliteWriter(db, IDENTITY), queue_size=2, batch_files=8,
                        on_event=events.append)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: actor.run(inflight=InFlight(), stats=Stats()))
            with anyio.fail_after(20):
                written = await actor.requests.store([prepared("a", "alpha"),
                                                      prepared("b", "beta")])
                # Answered: so committed, and visible to any new reader.
                assert [w.status for w in written] == ["inserted", "inserted"]
                assert stored(db, "a") and stored(db, "b")
                removed = await actor.requests.remove([written[0].doc_id], ["b", "nope"])
                assert sorted(removed.doc_ids) == sorted(w.doc_id for w in written)
                assert removed.not_found == ("nope",)
                assert not stored(db, "a") and not stored(db, "b")
            actor.requests.close()
    finally:
        actor.close()
    assert [e["event"] for e in events] == ["stored", "stored", "removed"]
    assert [e["commit"] for e in events] == [1, 1, 2]  # one request, one transaction


async def test_a_write_whose_caller_went_away_is_still_committed(tmp_path: Path) -> None:
    db = tmp_path / "index.db"
    committed = anyio.Event()
    actor = WriterActor(SqliteWriter(db, IDENTITY), queue_size=2, batch_files=8,
                        on_event=lambda event: committed.set())
    try:
        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                caller = anyio.CancelScope()

                async def ask() -> None:
                    with caller:
                        await actor.requests.store([prepared("left", "the client went away")])

                tg.start_soon(ask)
                await anyio.wait_all_tasks_blocked()  # the request waits in the inbox
                assert actor.depth()["used"] == 1
                caller.cancel()  # the client goes away before the writer has even started
                tg.start_soon(lambda: actor.run(inflight=InFlight(), stats=Stats()))
                await committed.wait()
                actor.requests.close()
    finally:
        actor.close()
    assert stored(db, "left")


async def test_requests_left_in_the_inbox_when_the_writer_stops_are_answered(
    tmp_path: Path
) -> None:
    actor = WriterActor(SqliteWriter(tmp_path / "index.db", IDENTITY),
                        queue_size=4, batch_files=8)
    answers: list[BaseException] = []

    async def ask(i: int) -> None:
        try:
            await actor.requests.store([prepared(f"d{i}", f"text {i}")])
        except Stopping as exc:
            answers.append(exc)

    try:
        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                for i in range(3):
                    tg.start_soon(ask, i)
                await anyio.wait_all_tasks_blocked()  # all three sit in the inbox
                with anyio.CancelScope() as scope:  # the writer starts and is cut short
                    scope.cancel()
                    await actor.run(inflight=InFlight(), stats=Stats())
    finally:
        actor.close()
    assert len(answers) == 3 and all("nothing of it was written" in str(a) for a in answers)


async def test_tool_writes_and_file_changes_racing_on_one_index_commit_in_order(
    tmp_path: Path
) -> None:
    """The folder changes while tools write: every write of both kinds is committed by the
    one writer, one transaction after another, each file's versions in the order they were
    made, and each tool call answers only once its documents are there."""
    config = make_config(tmp_path)
    events: list[dict[str, Any]] = []
    changed = anyio.Event()

    def on_event(event: dict[str, Any]) -> None:
        nonlocal changed
        events.append(event)
        changed.set()
        changed = anyio.Event()

    rounds = 6
    async with running(config, serving(True), on_event=on_event,
                       embedding=fake(config)) as rt:
        tools = Tools(rt)
        db = config.store.sqlite_path

        async def tool_writes() -> None:
            for i in range(rounds):
                result = await tools("upsert_documents", docs=[
                    {"text": f"Tool note {i} about lighthouses.", "external_id": f"tool-{i}"}])
                assert result["results"][0]["status"] == "inserted"
                assert stored(db, f"tool-{i}")  # searchable on return: already committed

        async def file_changes() -> None:
            for i in range(rounds):
                for version in ("first", "second"):
                    (config.watched.root / f"f{i}.md").write_text(
                        f"# File {i}\n\nThe {version} version of file {i}.\n")
                    await anyio.lowlevel.checkpoint()

        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                tg.start_soon(tool_writes)
                tg.start_soon(file_changes)

            def settled() -> bool:
                reader = SqliteReader(db)
                try:
                    texts = [reader.content(d.doc_id) or "" for d in
                             reader.documents_page(DocFilter(), 100)
                             if d.external_id.startswith("file:")]
                finally:
                    reader.close()
                return len(texts) == rounds and all("second version" in t for t in texts)

            while not settled():
                await changed.wait()

    tool_events = [e for e in events if e.get("source") == "tool"]
    file_events = [e for e in events if e["event"] in ("inserted", "updated")]
    assert [e["external_id"] for e in tool_events] == [f"tool-{i}" for i in range(rounds)]
    assert {e["path"] for e in file_events} == {f"f{i}.md" for i in range(rounds)}
    # One writer: its transactions are numbered in the order their events were reported,
    # tool writes and file changes alike. (Each file's versions were committed in order:
    # the loop above waited until every file's stored text was its second version.)
    commits = [e["commit"] for e in events if "commit" in e]
    assert commits == sorted(commits)
    # Each tool call waited for its own commit before the next was made.
    assert len({e["commit"] for e in tool_events}) == rounds


async def test_a_request_the_index_cannot_take_fails_alone_and_the_writer_goes_on(
    tmp_path: Path
) -> None:
    db = tmp_path / "index.db"
    actor = WriterActor(SqliteWriter(db, IDENTITY), queue_size=4, batch_files=8)
    outcomes: dict[str, object] = {}
    all_answered = anyio.Event()

    async def ask(name: str, request: Any) -> None:
        try:
            outcomes[name] = await request
        except PocketError as exc:
            outcomes[name] = exc
        if len(outcomes) == 3:
            all_answered.set()

    try:
        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                # Queued together, so they share one transaction.
                tg.start_soon(ask, "before", actor.requests.store([prepared("a", "alpha")]))
                tg.start_soon(ask, "huge id", actor.requests.remove([2**63], []))
                tg.start_soon(ask, "after", actor.requests.store([prepared("b", "beta")]))
                await anyio.wait_all_tasks_blocked()
                tg.start_soon(lambda: actor.run(inflight=InFlight(), stats=Stats()))
                await all_answered.wait()
                actor.requests.close()
    finally:
        actor.close()
    assert isinstance(outcomes["huge id"], InvalidRequest)
    assert [w.status for w in outcomes["before"]] == ["inserted"]  # type: ignore[attr-defined]
    assert [w.status for w in outcomes["after"]] == ["inserted"]  # type: ignore[attr-defined]
    assert stored(db, "a") and stored(db, "b")


async def test_requests_queued_behind_a_failed_transaction_are_answered(
    tmp_path: Path
) -> None:
    writer = SqliteWriter(tmp_path / "index.db", IDENTITY)
    broken = anyio.Event()

    def remove(doc_ids: Any, external_ids: Any) -> Any:  # the disk goes away mid-transaction
        broken.set()
        raise RuntimeError("I/O error")

    writer.remove = remove  # type: ignore[method-assign]
    actor = WriterActor(writer, queue_size=4, batch_files=1)
    outcomes: list[BaseException] = []

    async def ask(request: Any) -> None:
        try:
            await request
        except PocketError as exc:
            outcomes.append(exc)

    try:
        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                tg.start_soon(ask, actor.requests.remove([1], []))
                await anyio.wait_all_tasks_blocked()
                for i in range(3):  # these arrive while the first is being written
                    tg.start_soon(ask, actor.requests.store([prepared(f"d{i}", f"text {i}")]))
                with pytest.raises(RuntimeError):
                    await actor.run(inflight=InFlight(), stats=Stats())
    finally:
        actor.close()
    assert broken.is_set()
    assert len(outcomes) == 4
    assert isinstance(outcomes[0], StoreError)
    assert all(isinstance(o, Stopping) for o in outcomes[1:])
