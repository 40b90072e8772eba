"""The runtime: one boot for every entry point, readiness and roles."""

from __future__ import annotations

from pathlib import Path

import anyio
import msgspec
import pytest
from support.provider_server import ProviderServer
from support.runtime import (
    fake,
    make_config,
    own_model,
    provider_embedding,
    remote_config,
    running,
    shared,
)
from support.tools import Tools, refused

from pocketmcp import readiness, runtime
from pocketmcp.commands.choosing import choose
from pocketmcp.embed import background
from pocketmcp.embed.local import LocalEmbedder
from pocketmcp.errors import OtherFolder, ReadOnly, WriterBusyError
from pocketmcp.plans import INDEXING, READING, WATCHING, Plan
from pocketmcp.runtime import Runtime, open_runtime
from pocketmcp.store.sqlite.reads import recorded_identity
from pocketmcp.store.sqlite.writes import SqliteWriter


async def test_a_second_runtime_on_one_index_reads_and_takes_over_when_the_first_stops(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runtime, "WRITER_RETRY_S", 0.1)  # tries the lock often: no long wait
    config = make_config(tmp_path)
    stop_first, first_stopped = anyio.Event(), anyio.Event()
    shared: dict[str, int] = {}
    first_up = anyio.Event()

    async def first() -> None:
        async with running(config, embedding=fake(config)) as rt:
            shared.update(await Tools(rt).add(("a", "Owls hunt at night.")))
            first_up.set()
            await stop_first.wait()
        first_stopped.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(first)
        await first_up.wait()
        async with running(config, embedding=fake(config)) as rt:
            second = Tools(rt)
            assert rt.status.role == "reader"
            found = await second.search("owls", mode="keyword")
            assert [m["doc_id"] for m in found] == [shared["a"]]  # it reads the other's writes
            with refused(ReadOnly, match="writer lock"):
                await second.add(("b", "Bats hunt at night too."))
            stop_first.set()
            await first_stopped.wait()
            with anyio.fail_after(20):  # the lock is free: the reader becomes the writer
                while rt.status.role != "writer":  # noqa: ASYNC110 - no event marks the role
                    await anyio.sleep(0.1)
            assert "b" in await second.add(("b", "Bats hunt at night too."))


async def test_indexing_needs_the_writer_lock_and_says_who_has_it(tmp_path: Path) -> None:
    config = make_config(tmp_path)
    async with running(config, embedding=fake(config)):
        with pytest.raises(WriterBusyError, match="writer lock"):
            async with open_runtime(config, INDEXING, embedding=fake(config)) as rt:
                await rt.fed.wait()


async def test_a_reader_waits_for_the_index_to_exist_and_never_takes_the_lock(
    tmp_path: Path
) -> None:
    config = make_config(tmp_path)
    async with open_runtime(config, READING, embedding=fake(config)) as reader:
        with anyio.move_on_after(0.5):
            await reader.ready.wait()
        assert not reader.ready.is_set()  # no index yet: nothing to read
        async with running(config, embedding=fake(config)) as writer:
            await Tools(writer).add(("n", "Newts live in ponds."))
            with anyio.fail_after(30):
                await reader.started()
            assert reader.status.role == "reader"
            found = await Tools(reader).search("newts", mode="keyword")
            assert len(found) == 1


async def test_a_reader_reports_the_first_scan_done_when_the_writer_records_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(readiness, "SCAN_POLL_S", 0.05)  # looks often: no long wait
    config = make_config(tmp_path)
    async with running(config, embedding=fake(config)) as first:  # makes the index
        await Tools(first).add(("s", "Swifts sleep on the wing."))
    identity = recorded_identity(config.store.sqlite_path)
    assert identity is not None
    holder = SqliteWriter(config.store.sqlite_path, identity)  # the writer, mid-scan
    try:
        holder.record_scan("running")
        async with running(config, READING, embedding=fake(config)) as reader:
            assert reader.status.role == "reader"
            with anyio.move_on_after(4 * readiness.SCAN_POLL_S):
                await until_scan_done(reader)
            assert not reader.status.initial_indexing_done
            assert reader.status.phase == "indexing"
            holder.record_scan("done")
            with anyio.fail_after(10):
                await until_scan_done(reader)
            assert reader.status.phase == "ready"
    finally:
        holder.close()


async def until_scan_done(rt: Runtime) -> None:
    while not rt.status.initial_indexing_done:  # noqa: ASYNC110 - the status has no event
        await anyio.sleep(0.05)


async def test_after_one_scan_a_remote_provider_still_embeds_queries(
    tmp_path: Path, fake_provider: ProviderServer
) -> None:
    provider = fake_provider
    # `eval` scans its corpus once, then searches: the provider's client outlives the scan.
    config = remote_config(tmp_path, provider)
    (config.watched.root / "owls.md").write_text("# Owls\n\nOwls hunt at night.\n")
    plan = Plan(writer="must", feed="scan", requests=False)
    with anyio.fail_after(60):
        async with open_runtime(config, plan, embedding=provider_embedding(config)) as rt:
            await rt.fed.wait()
            reading = await rt.reading()
            vector = await reading.embedder.embed_query("birds at night")
    assert vector.shape == (384,)


async def test_a_serving_runtime_learns_the_models_background_before_it_is_ready(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What an earlier test of this process learnt is forgotten: this start must learn it.
    monkeypatch.setattr(background, "_known", {})
    config = make_config(tmp_path)
    async with running(config, embedding=fake(config)) as rt:
        before = rt.services.embedder.usage.inputs
        tools = Tools(rt)
        await tools("search", query="owls hunting at night in the forest")
        # The first search embeds its query alone: the probes were embedded at start.
        assert rt.services.embedder.usage.inputs - before == 1


async def test_a_followed_folder_is_scanned_before_the_documents_model_loads(
    tmp_path: Path, embedder: LocalEmbedder
) -> None:
    """Following a folder, keywords come first: the scan does not wait for the model that
    embeds documents (nor share the cores with its loading). It loads with the first
    vectors wanted, and not at all while none are."""
    config = make_config(tmp_path)
    (config.watched.root / "owls.md").write_text("# Owls\n\nOwls hunt at night.\n")
    # one scan: every vector in
    async with open_runtime(config, INDEXING, embedding=shared(embedder, config)) as rt:
        with anyio.fail_after(120):
            await rt.fed.wait()
    # a model of its own: when it loads is what this test looks at
    async with open_runtime(config, WATCHING, embedding=own_model(config)) as rt:
        with anyio.fail_after(60):
            await rt.started()
            await until_scan_done(rt)
        embedder = rt.services.embedder
        assert isinstance(embedder, LocalEmbedder)
        assert embedder._model is None  # nothing new: nothing to embed
        (config.watched.root / "bats.md").write_text("# Bats\n\nBats hunt at dusk.\n")
        with anyio.fail_after(60):
            while embedder._model is None:  # noqa: ASYNC110 - loaded in a worker thread
                await anyio.sleep(0.05)


async def test_another_folder_of_this_machine_is_refused_one_moved_is_taken(
        tmp_path: Path) -> None:
    """An index holding one folder is fed another only when asked (--rebuild) or when the
    first is gone (moved): a mistyped folder would remove the first one's documents."""
    index = {"SQLITE_PATH": str(tmp_path / "idx" / "index.db")}
    first, other = tmp_path / "notes", tmp_path / "other"
    for folder, text in ((first, "Otters hold hands."), (other, "Herons stand still.")):
        folder.mkdir()
        (folder / "a.md").write_text(f"# A\n\n{text}\n")

    async def index_once(folder: Path, plan: Plan = INDEXING) -> dict[str, int]:
        config = make_config(tmp_path, {**index, "WATCH_DIR": str(folder)})
        async with open_runtime(config, plan, embedding=fake(config)) as rt:
            with anyio.fail_after(60):
                await rt.fed.wait()
            feed = rt.feed  # None when the start failed: leaving the block raises why
            return {} if feed is None else feed.stats.counts()

    await index_once(first)
    with pytest.raises(OtherFolder, match=f"is the index of {first}; {other} is another "
                                          "folder of this machine") as refused_:
        await index_once(other)
    assert refused_.value.code == "OTHER_FOLDER"
    # Nor is it searched as that folder's index: its answers would be the first one's.
    with pytest.raises(OtherFolder, match=f"is the index of {first}, not of {other}"):
        choose(make_config(tmp_path, {**index, "WATCH_DIR": str(other)}), "search")
    chosen, _ = choose(make_config(tmp_path, {**index, "WATCH_DIR": str(first)}), "search")
    assert chosen.watched.root == first
    config = make_config(tmp_path, {**index, "WATCH_DIR": str(first)})
    async with running(config, embedding=fake(config)) as rt:  # nothing was removed
        assert [m["path"] for m in await Tools(rt).search("otters", mode="keyword")] == ["a.md"]
    moved = tmp_path / "notes-moved"
    first.rename(moved)
    assert (await index_once(moved))["unchanged"] == 1
    assert (await index_once(other, msgspec.structs.replace(INDEXING, rebuild=True))
            )["added"] == 1
