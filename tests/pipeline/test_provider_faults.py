"""The pipeline with a remote provider that fails: nothing unembedded is recorded, the queues
stay bounded while it waits, and the folder is indexed once the provider is well again."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from support.provider_server import Fault, ProviderServer
from support.runtime import remote_config, running
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


async def documents(rt: Runtime) -> int:
    index = rt.opened()
    assert index is not None
    return (await index.run(lambda r: r.counts()))["documents"]


async def test_while_the_provider_fails_the_pipeline_waits_with_bounded_queues_and_records_nothing(
    tmp_path: Path, fake_provider: ProviderServer
) -> None:
    provider = fake_provider
    files = 30
    for i in range(files):
        write(tmp_path, f"n{i:02}.md", f"Note {i} about owls, tides and bread number {i}.")
    provider.always = Fault(503)
    config = remote_config(tmp_path, provider, queue_size="2", embed_batch_size="4",
                           embed_concurrency="1")
    async with running(config, serving(True)) as rt:
        pipeline = rt.pipeline
        assert pipeline is not None
        usage = rt.services.embedder.usage
        await until(lambda: usage.failures >= 2)  # failed, waited, failed again
        depths = pipeline.queue_depths()
        assert all(d["used"] <= d["max"] for d in depths.values()), depths
        assert depths["events"]["waiting_senders"] >= 1  # the watcher itself is held back
        assert len(pipeline.inflight) < files  # bounded by the buffers, not the folder
        assert await documents(rt) == 0 and pipeline.stats.added == 0
        status = (await Tools(rt)("status"))["embedding"]
        assert status["failures"] >= 2 and "503" in status["last_error"]
        provider.always = None
        await until(lambda: pipeline.scan_done.is_set(), 30)
        assert await documents(rt) == files and pipeline.stats.added == files
        found = await Tools(rt).search("owls tides bread number 7", mode="vector")
        assert found and (await Tools(rt)("status"))["embedding"]["available"]


async def test_stopping_while_the_provider_fails_leaves_the_files_to_the_next_start(
    tmp_path: Path, fake_provider: ProviderServer
) -> None:
    provider = fake_provider
    for i in range(3):
        write(tmp_path, f"n{i}.md", f"Note {i} about herons.")
    provider.always = Fault(hang=True)
    config = remote_config(tmp_path, provider, embed_timeout_s="0.2")
    with anyio.fail_after(15):  # the wait for the provider is cut short by stopping
        async with running(config, serving(True)) as rt:
            pipeline = rt.pipeline
            assert pipeline is not None
            await until(lambda: pipeline.stats.last_error)  # the pipeline waits for it
            assert await documents(rt) == 0
    provider.always = None
    async with running(config, serving(True)) as rt:
        assert rt.pipeline is not None
        await until(lambda: rt.pipeline.scan_done.is_set())  # type: ignore[union-attr]
        assert await documents(rt) == 3


async def test_a_file_whose_text_the_provider_refuses_is_skipped_and_indexed_once_fixed(
    tmp_path: Path, fake_provider: ProviderServer
) -> None:
    provider = fake_provider
    write(tmp_path, "a.md", "Alpacas graze on the hills.")
    write(tmp_path, "b.md", "Bread rises. POISON is in this note.")
    write(tmp_path, "c.md", "Cormorants dive for fish.")
    async with running(remote_config(tmp_path, provider), serving(True)) as rt:
        pipeline = rt.pipeline
        assert pipeline is not None
        await until(lambda: pipeline.scan_done.is_set())
        assert await documents(rt) == 2 and pipeline.stats.skipped == 1
        # No threshold: in a two-note index BM25 gives a word in one of them no weight.
        paths = {m["path"] for m in await Tools(rt).search("bread alpacas cormorants",
                                                            mode="keyword", score_threshold=0)}
        assert paths == {"a.md", "c.md"}  # b.md was never recorded as indexed
        write(tmp_path, "b.md", "Bread rises overnight.")
        await until(lambda: documents(rt), 20)
        await until(lambda: pipeline.stats.added == 3)
        assert await documents(rt) == 3


async def test_one_scan_ends_with_the_providers_refusal_and_records_nothing(
    tmp_path: Path, fake_provider: ProviderServer
) -> None:
    provider = fake_provider
    write(tmp_path, "a.md", "Alpacas graze on the hills.")
    provider.always = Fault(401)
    config = remote_config(tmp_path, provider)
    with pytest.raises(ProviderRejected, match="OPENAI_API_KEY"):
        async with open_runtime(config, INDEXING) as rt:
            await rt.fed.wait()
    from pocketmcp.store.sqlite.queries import SqliteReader

    reader = SqliteReader(config.sqlite_path)
    try:
        assert reader.counts()["documents"] == 0
    finally:
        reader.close()
