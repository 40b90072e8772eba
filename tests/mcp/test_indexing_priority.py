"""Indexing below searches: the documents' threads at a lower OS priority, at most
INDEX_CPU_BUDGET's share of them, and INDEX_CPU_BUDGET's pauses; with the real model."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

import anyio
import pytest
from support.runtime import with_fields

from pocketmcp.config import load
from pocketmcp.embed.local import LocalEmbedder, index_threads
from pocketmcp.embed.models import ModelSpec
from pocketmcp.embed.priority import NICE
from pocketmcp.pipeline.budget import CpuBudget

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread nice")


def threads() -> dict[int, tuple[str, int]]:
    """This process's threads: id -> (name, nice value), from /proc."""
    found = {}
    for task in Path("/proc/self/task").iterdir():
        try:
            stat = (task / "stat").read_text()
        except OSError:
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat.rsplit(")", 1)[1].split()
        found[int(task.name)] = (name, int(fields[16]))
    return found


@linux
async def test_documents_embed_at_a_lower_priority_than_queries() -> None:
    base = os.getpriority(os.PRIO_PROCESS, 0)
    before = set(threads())
    spec = ModelSpec(load({}, environ={}).embed)
    embedder = LocalEmbedder(spec, index_threads=2)
    try:
        await embedder.embed_documents(["a note about tea " * 40])
        await embedder.embed_query("tea")
        low = min(19, base + NICE)
        new = {tid: t for tid, t in threads().items() if tid not in before}
        lowered = {tid for tid, t in new.items() if t[1] == low}
        # the thread embedding documents, and the model's own threads, made from it
        assert len(lowered) >= 2, new

        def own() -> int:
            return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

        assert await embedder._lowered.run(own) == low
        assert await anyio.to_thread.run_sync(own) == base  # where queries run
        assert own() == base
    finally:
        await embedder.aclose()


async def test_index_threads_caps_the_documents_session() -> None:
    spec = ModelSpec(with_fields(load({}, environ={}), embed={"threads": 4}).embed)
    embedder = LocalEmbedder(spec, index_threads=1)
    try:
        model = embedder._documents_model()
        options = model.model.model.get_session_options()  # the onnxruntime session
        assert options.intra_op_num_threads == 1
    finally:
        await embedder.aclose()


async def test_a_cpu_budget_pauses_to_stay_under_it() -> None:
    """The pacing's logic, on clocks the test moves: a batch that used more CPU than the
    budget allows for its wall time is followed by the pause that evens it out."""
    clock = {"cpu": 0.0, "wall": 0.0}
    budget = CpuBudget(25, cores=2, cpu=lambda: clock["cpu"], wall=lambda: clock["wall"])
    clock["cpu"] += 0.2  # a batch: 0.2 s of CPU in 0.1 s (two threads busy)
    clock["wall"] += 0.1
    assert budget.owed() == pytest.approx(0.3)  # half a core: 0.4 s of wall in all
    with anyio.fail_after(5):
        await budget.pace()
    assert budget.paused_s == pytest.approx(0.3)
    clock["wall"] += 0.3 + 3.0  # the pause, then a quiet while: a new window
    await budget.pace()
    assert budget.owed() <= 0
    clock["cpu"] += 0.05  # within the budget: no pause
    clock["wall"] += 0.2
    before = budget.paused_s
    await budget.pace()
    assert budget.paused_s == before


def test_the_default_thread_cap_leaves_a_core_to_searches_beyond_two() -> None:
    assert index_threads(None, 0, cores=2) == 2
    assert index_threads(None, 0, cores=8) == 7
    assert index_threads(4, 0, cores=8) == 4  # the session's own threads bound it
    assert index_threads(None, 3, cores=8) == 3
    assert index_threads(None, 16, cores=8) == 8
    assert index_threads(None, 0, cores=1) == 1
