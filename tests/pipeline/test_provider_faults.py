"""The pipeline with a remote provider that fails: new and edited notes are written for
keyword search all the same, their chunks wait for vectors (queues bounded, nothing
duplicated), and get them once the provider is well again."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from support.provider_server import Fault, ProviderServer
from support.runtime import provider_embedding, remote_config, running
from support.tools import Tools

from pocketmcp.errors import ProviderRejected
from pocketmcp.plans import INDEXING, serving
from pocketmcp.runtime import Runtime, open_runtime


def write(root: Path, rel: str, text: str) -> None:
    path = root / "kb" / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


async def until(check: Callable[[], Awaitable[Any] | Any], seconds: float = 20) -> Any:
    """Poll `check` with a deadline until it gives something true."""
    with anyio.fail_after(seconds):
        while True:
            value = check()
            if isinstance(value, Awaitable):
                value = await value
            if value:
                return value
            await anyio.sleep(0.02)


async def counts(rt: Runtime) -> dict[str, int]:
    index = rt.opened()
    assert index is not None
    return await index.run(lambda r: r.counts())


async def documents(rt: Runtime) -> int:
    return (await counts(rt))["documents"]


async def waiting(rt: Runtime) -> int:
    return (await counts(rt))["waiting"]


async def test_while_the_provider_fails_notes_are_keyword_searchable_and_vectors_follow(
    tmp_path: Path, fake_provider: ProviderServer
) -> None:
    provider = fake_provider
    files = 30
    for i in range(files):
        write(tmp_path, f"n{i:02}.md", f"Note {i} about owls, tides and bread number {i}.")
    provider.always = Fault(503)
    config = remote_config(tmp_path, provider, queue_size="2", embed={"batch_size": 4},
                           embed_concurrency="1")
    async with running(config, serving(True), embedding=provider_embedding(config)) as rt:
        pipeline = rt.pipeline
        assert pipeline is not None
        usage = rt.services.embedder.usage
        # The first scan is not held back by the provider: every note is written.
        await until(lambda: pipeline.scan_done.is_set(), 30)
        await until(lambda: usage.failures >= 2)  # failed, waited, failed again
        depths = pipeline.queue_depths()
        assert all(d["used"] <= d["max"] for d in depths.values()), depths
        assert await documents(rt) == files and pipeline.stats.added == files
        assert await waiting(rt) == files  # one chunk each, all waiting for vectors
        found = await Tools(rt).search("owls tides bread number 7")
        assert found and found[0]["path"] == "n07.md"  # by keywords, in hybrid mode
        status = (await Tools(rt)("status"))["embedding"]
        assert status["failures"] >= 2 and "503" in status["last_error"]
        provider.always = None
        await until(lambda: _none(waiting(rt)), 30)  # then every vector comes
        assert (await counts(rt))["chunks"] == files  # none written twice
        found = await Tools(rt).search("owls tides bread number 7", mode="vector")
        assert found and (await Tools(rt)("status"))["embedding"]["available"]


async def _none(value: Awaitable[int]) -> bool:
    return await value == 0


async def _one(value: Awaitable[int]) -> bool:
    return await value == 1


async def test_stopping_while_the_provider_fails_leaves_the_vectors_to_the_next_start(
    tmp_path: Path, fake_provider: ProviderServer
) -> None:
    provider = fake_provider
    for i in range(3):
        write(tmp_path, f"n{i}.md", f"Note {i} about herons.")
    provider.always = Fault(hang=True)
    config = remote_config(tmp_path, provider, embed={"timeout_s": 0.2, "retries": 0})
    with anyio.fail_after(15):  # the wait for the provider is cut short by stopping
        async with running(config, serving(True), embedding=provider_embedding(config)) as rt:
            pipeline = rt.pipeline
            assert pipeline is not None
            await until(lambda: pipeline.stats.last_error)  # the embedder waits for it
            assert await documents(rt) == 3 and await waiting(rt) == 3
    provider.always = None
    async with running(config, serving(True), embedding=provider_embedding(config)) as rt:
        assert rt.pipeline is not None
        await until(lambda: _none(waiting(rt)))
        assert await documents(rt) == 3 and (await counts(rt))["chunks"] == 3
        assert rt.pipeline.stats.added == 0  # the files were not read again


async def test_a_note_whose_text_the_provider_refuses_stays_keyword_searchable(
    tmp_path: Path, fake_provider: ProviderServer
) -> None:
    provider = fake_provider
    write(tmp_path, "a.md", "Alpacas graze on the hills.")
    write(tmp_path, "b.md", "Bread rises. POISON is in this note.")
    write(tmp_path, "c.md", "Cormorants dive for fish.")
    config = remote_config(tmp_path, provider)
    async with running(config, serving(True), embedding=provider_embedding(config)) as rt:
        pipeline = rt.pipeline
        assert pipeline is not None
        await until(lambda: pipeline.stats.skipped == 1)
        await until(lambda: _one(waiting(rt)))  # the others' vectors come, b.md's waits
        assert await documents(rt) == 3
        # No threshold: in a small index BM25 gives a word in one note little weight.
        paths = {m["path"] for m in await Tools(rt).search("bread alpacas cormorants",
                                                            mode="keyword", score_threshold=0)}
        assert paths == {"a.md", "b.md", "c.md"}
        write(tmp_path, "b.md", "Bread rises overnight.")
        await until(lambda: pipeline.stats.updated == 1)
        await until(lambda: _none(waiting(rt)))  # the new text is embedded
        assert await documents(rt) == 3 and (await counts(rt))["chunks"] == 3


async def test_one_scan_ends_with_the_providers_refusal_its_keywords_written(
    tmp_path: Path, fake_provider: ProviderServer
) -> None:
    provider = fake_provider
    write(tmp_path, "a.md", "Alpacas graze on the hills.")
    provider.always = Fault(401)
    config = remote_config(tmp_path, provider)
    with pytest.raises(ProviderRejected, match="OPENAI_API_KEY"):
        async with open_runtime(config, INDEXING, embedding=provider_embedding(config)) as rt:
            await rt.fed.wait()
    from pocketmcp.store.sqlite.queries import SqliteReader

    reader = SqliteReader(config.store.sqlite_path)
    try:
        assert reader.counts() == {"documents": 1, "chunks": 1, "waiting": 1}
    finally:
        reader.close()
    provider.always = None
    # the next run embeds what waits
    async with open_runtime(config, INDEXING, embedding=provider_embedding(config)) as rt:
        await rt.fed.wait()
    reader = SqliteReader(config.store.sqlite_path)
    try:
        assert reader.counts() == {"documents": 1, "chunks": 1, "waiting": 0}
    finally:
        reader.close()
