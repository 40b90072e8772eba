"""Backpressure: a slow model holds back every stage up to the watcher."""

from __future__ import annotations

import threading

import anyio
import numpy as np
from anyio.lowlevel import checkpoint
from support.index import Index

from pocketmcp.messages import FileSeen, ScanDone


async def test_queue_depths_stay_within_their_bounds_with_a_slow_embedder(
    fake_index: Index, write
) -> None:
    index = fake_index
    files = 120
    for i in range(files):
        write(f"f{i:03}.md", f"Note {i}. " + f"Some words about topic {i}. " * 5)
    config = index.config.replace(queue_size=2, embed_batch_size=4, read_concurrency=3)
    index.config = config
    samples: list[dict] = []
    inflight: list[int] = []
    release = threading.Semaphore(0)
    sent = 0

    async def source(outbox) -> None:
        nonlocal sent
        async with outbox:
            for i in range(files):
                await outbox.send(FileSeen(f"f{i:03}.md"))
                sent += 1
            await outbox.send(ScanDone(files))

    writer = index.writer()
    try:
        pipeline = index.pipeline(writer, follow=False, source=source)

        def slow_model(texts: list[str]) -> np.ndarray:
            # Runs in a worker thread, as a model does: look at every queue, then let time
            # pass only as the test's own semaphore allows (no clock involved).
            samples.append(pipeline.queue_depths())
            inflight.append(len(pipeline.inflight))
            release.acquire()
            rows = np.random.default_rng(len(texts)).normal(size=(len(texts), 384))
            return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)

        async def slow_embed(texts: list[str]) -> np.ndarray:
            return await anyio.to_thread.run_sync(slow_model, texts)

        pipeline.embed = slow_embed

        async def releaser() -> None:
            # Let the model go one batch at a time, after giving every other task many
            # turns of the event loop, so the stages upstream run ahead until they block.
            while True:
                for _ in range(50):
                    await checkpoint()
                release.release()

        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                tg.start_soon(releaser)
                await pipeline.run()
                tg.cancel_scope.cancel()
    finally:
        writer.close()
    assert pipeline.stats.added == files
    assert len(samples) >= files // 4
    for sample in samples:
        for name, depth in sample.items():
            assert depth["used"] <= depth["max"] == 2, (name, depth)
        assert set(sample) == {"events", "hashed", "chunked", "writer"}
    # The watcher itself was held back: it was blocked on a full queue while the model
    # worked, instead of listing the whole folder into memory.
    assert any(s["events"]["used"] == 2 and s["events"]["waiting_senders"] for s in samples)
    # Files in flight stay bounded by the buffers, not by the size of the folder.
    assert max(inflight) <= 4 * 2 + 3 + 4 + 2
