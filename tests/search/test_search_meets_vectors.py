"""A search that meets a document getting its vectors: the vectors are committed between
the search's stages and its reading of their rows. The chunks keep their ids, so the rows
are read as they were ranked (nothing to rank again), and the search finds the document,
with the vector score the commit gave it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from support.fake_embedder import FakeEmbedder
from support.mcp_harness import until
from support.runtime import fake, make_config, running
from support.tools import Tools

from pocketmcp.pipeline.precedence import Precedence
from pocketmcp.plans import serving
from pocketmcp.search import run as search


async def test_a_search_during_a_vector_commit_still_finds_the_document(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The commit waits for the search in flight (which waits for it here) at most the stages'
    # bound, GIVE_WAY_S: made shorter, the test waits less long.
    monkeypatch.setattr(Precedence.give_way, "__defaults__", (0.1,))
    config = make_config(tmp_path)
    (config.watched.root / "old.md").write_text("# Old\n\nAn old note about launch checklists.\n")
    (config.watched.root / "tea.md").write_text("# Tea\n\nTea is brewed cooler than coffee.\n")
    ranked = anyio.Event()  # the search's stages have run: vectors may come now
    embed = FakeEmbedder.embed_documents

    async def held(self: FakeEmbedder, texts: list[str]) -> Any:
        await ranked.wait()
        return await embed(self, texts)

    monkeypatch.setattr(FakeEmbedder, "embed_documents", held)
    async with running(config, serving(True),
                       embedding=fake(config)) as rt:
        assert rt.pipeline is not None
        with anyio.fail_after(60):
            await rt.pipeline.scan_done.wait()
        tools = Tools(rt)
        assert (await tools("status"))["chunks_waiting"] == 2
        reindexed = await tools("reindex")  # says what still waits for vectors, as status does
        assert (reindexed["chunks_total"], reindexed["chunks_waiting"]) == (2, 2), reindexed
        retrieve = search.retrieve
        first: list[int] = []  # the chunk ids the first ranking saw

        async def then_vectors(*args: Any, **kw: Any) -> Any:
            staged = await retrieve(*args, **kw)
            if not ranked.is_set():  # the first ranking only: vectors committed after it
                first.extend(staged.stage.doc_of)
                ranked.set()
                await until(lambda: tools("status"), lambda s: s["chunks_waiting"] == 0, 60)
            return staged

        monkeypatch.setattr(search, "retrieve", then_vectors)
        [match] = await tools.search("launch checklists", top_k=1,
                                     filter={"path_glob": "old.md"})
        assert match["path"] == "old.md" and match["vector_score"] is not None
        assert match["chunk_id"] in first  # the id it had while it waited
