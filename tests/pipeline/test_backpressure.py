"""Backpressure: bounded queues hold the watcher back while the writer works, and a slow
model holds back nothing: the folder is written for keyword search while it embeds."""

from __future__ import annotations

import threading

import anyio
import numpy as np
from anyio.lowlevel import checkpoint
from support.index import Index
from support.runtime import with_fields

from pocketmcp.messages import FileSeen, ScanDone


async def test_a_slow_embedder_holds_back_no_stage_and_the_queues_stay_bounded(
    fake_index: Index, write
) -> None:
    index = fake_index
    files = 120
    for i in range(files):
        write(f"f{i:03}.md", f"Note {i}. " + f"Some words about topic {i}. " * 5)
    config = with_fields(index.config, pipeline={"queue_size": 2, "read_concurrency": 3},
                         embed={"batch_size": 4})
    index.config = config
    samples: list[dict] = []
    inflight: list[int] = []
    release = threading.Semaphore(0)
    calls: list[int] = []
    scanned_after: list[int] = []

    writer = index.writer()
    try:
        async def source(outbox) -> None:
            async with outbox:
                for i in range(files):
                    await outbox.send(FileSeen(f"f{i:03}.md"))
                    samples.append(pipeline.queue_depths())
                    inflight.append(len(pipeline.inflight))
                await outbox.send(ScanDone(files))

        # No giving way to the first scan: the model may start at once, and is held.
        pipeline = index.pipeline(writer, follow=False, source=source, give_way_s=0)

        def slow_model(texts: list[str]) -> np.ndarray:
            calls.append(len(texts))
            release.acquire()  # time passes only as the test allows (no clock involved)
            rows = np.random.default_rng(len(texts)).normal(size=(len(texts), 384))
            return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)

        async def slow_embed(texts: list[str]) -> np.ndarray:
            return await anyio.to_thread.run_sync(slow_model, texts)

        pipeline.embed = slow_embed

        async def releaser() -> None:
            await pipeline.scan_done.wait()
            scanned_after.append(len(calls))
            while True:
                for _ in range(20):
                    await checkpoint()
                release.release()

        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                tg.start_soon(releaser)
                await pipeline.run()
                tg.cancel_scope.cancel()
    finally:
        writer.close()
    # Every file was written for keywords while the model was still on its first batch.
    assert scanned_after == [1] or scanned_after == [0]
    assert pipeline.stats.added == files and pipeline.stats.chunks_vectors == files
    for sample in samples:
        for name, depth in sample.items():
            assert depth["used"] <= depth["max"] == 2, (name, depth)
        assert set(sample) == {"events", "hashed", "writer"}
    # The watcher itself was held back by the writer's pace, not listed into memory.
    assert any(s["events"]["used"] == 2 for s in samples)
    # Files in flight stay bounded by the buffers, not by the size of the folder (each of
    # the three readers holds a group of at most a queue's size).
    assert max(inflight) <= 4 * 2 + 3 * 2 + 4 + 2
