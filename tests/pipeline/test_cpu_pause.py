"""INDEX_CPU_BUDGET's pause comes after a batch's vectors are sent on to the writer: it
holds back the next batch, never the vectors already made."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support.fake_embedder import FakeEmbedder
from support.index import Index
from support.runtime import make_config

from pocketmcp.core.chunking import Chunker
from pocketmcp.pipeline import budget, supervisor


async def test_vectors_are_written_before_the_budgets_pause(
        tmp_path: Path, fake_embedder: FakeEmbedder, fake_chunker: Chunker,
        monkeypatch: pytest.MonkeyPatch) -> None:
    # A machine where indexing always owes CPU time: every batch is followed by the longest
    # pause (MAX_PAUSE_S), on the real CpuBudget read through a clock that runs 100x fast.
    def always_over(percent: int) -> budget.CpuBudget:
        return budget.CpuBudget(percent, cpu=lambda: 100 * time.monotonic())

    monkeypatch.setattr(supervisor, "CpuBudget", always_over)
    monkeypatch.setattr(budget, "MAX_PAUSE_S", 0.5)  # the pause made shorter: the test too
    index = Index(make_config(tmp_path, index_cpu_budget=50), fake_embedder, fake_chunker)
    (index.kb / "owls.md").write_text("# Owls\n\nOwls hunt at night in the forest.\n")
    embedded_at: list[float] = []
    written_at: list[float] = []

    async def embed(texts: list[str]) -> np.ndarray:
        vectors = await fake_embedder.embed_documents(texts)
        embedded_at.append(time.monotonic())
        return vectors

    def on_event(event: dict[str, Any]) -> None:
        if event["event"] == "embedded":
            written_at.append(time.monotonic())

    index.embed = embed  # type: ignore[method-assign]
    index.on_event = on_event  # type: ignore[method-assign]
    pipeline = await index.index_once()
    assert pipeline.stats.chunks_vectors == 1
    assert len(embedded_at) == 1 and len(written_at) == 1
    # Written at once (a write takes milliseconds), not after the pause.
    assert written_at[0] - embedded_at[0] < budget.MAX_PAUSE_S / 2, (
        written_at[0] - embedded_at[0])
