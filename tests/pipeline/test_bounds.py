"""A pathological text cannot hold the pipeline back: each document makes at most
the most chunks one document makes, and tools refuse texts beyond it with a clear error."""

from __future__ import annotations

import random
import re
import time
from pathlib import Path

import pytest
from structlog.testing import capture_logs
from support.fake_embedder import FakeEmbedder
from support.index import Index
from support.runtime import fake, make_config, running
from support.tools import Tools, refused

from pocketmcp.config import Config
from pocketmcp.core.chunking import Chunker
from pocketmcp.errors import InvalidRequest


def _one_line(chars: int) -> str:
    rng = random.Random(16)
    words = ["".join(rng.choice("abcdefghij") for _ in range(rng.randint(2, 9)))
             for _ in range(2000)]
    return " ".join(rng.choice(words) for _ in range(chars // 3))[:chars]


def test_a_capped_split_does_work_for_the_chunks_it_keeps_not_for_the_whole_text(
        fake_chunker: Chunker) -> None:
    text = _one_line(300_000)
    started = time.perf_counter()
    chunks, covered = fake_chunker.split_capped(text, most=20)
    capped_s = time.perf_counter() - started
    assert len(chunks) == 20
    assert covered == chunks[-1].end < len(text)
    assert [c.idx for c in chunks] == list(range(20))
    assert all(text[c.start:c.end] == c.text for c in chunks)
    # A text under the cap comes back whole, exactly as split() makes it.
    whole, covered = fake_chunker.split_capped(text[:5000], most=20)
    assert whole == fake_chunker.split(text[:5000]) and covered == 5000
    # A long text under the cap is split a window at a time and still covered to its end.
    long = "\n\n".join(f"Paragraph {i} about the topic number {i}." for i in range(3000))
    chunks, covered = fake_chunker.split_capped(long, most=10_000)
    assert covered == len(long) and chunks[-1].end == len(long)
    assert all(long[c.start:c.end] == c.text for c in chunks)
    assert capped_s < 10  # the whole text would take far longer (about 1000 chunks)


@pytest.fixture
def capped(tmp_path: Path, fake_embedder: FakeEmbedder, fake_chunker: Chunker) -> Index:
    return Index(make_config(tmp_path, pipeline={"max_chunks_per_doc": 20}), fake_embedder,
                 fake_chunker)


@pytest.mark.usefixtures("processes")
async def test_a_million_column_csv_and_a_300_kb_line_are_cut_and_other_files_indexed(
        capped: Index) -> None:
    kb = capped.kb
    columns = 1_000_000
    row = ",".join(str(i % 10) for i in range(columns)) + "\n"
    (kb / "wide.csv").write_text(row * 2)  # 4 MB: one million columns, two rows
    (kb / "line.txt").write_text(_one_line(300_000))
    (kb / "bikes.md").write_text("# Bicycles\n\nPatch the inner tube of a bicycle tyre.\n")
    started = time.perf_counter()
    with capture_logs() as logged:
        pipeline = await capped.index_once()
    elapsed = time.perf_counter() - started
    assert pipeline.stats.skipped == 0
    assert capped.search("repair a punctured bicycle tyre")[0] == "bikes.md"
    for rel in ("wide.csv", "line.txt"):
        assert capped.text_of(rel)  # indexed up to the cut
    cuts = {e["path"]: e for e in logged if e["event"] == "cut"}
    assert set(cuts) == {"wide.csv", "line.txt"}
    assert all("the most one document makes" in e["reason"] and e["chunks"] == 20
               for e in cuts.values())
    # The run names them with what was left out (the index command's summary prints them).
    left = dict(pipeline.stats.cut)
    assert set(left) == {"wide.csv", "line.txt"}
    assert all(re.match(r"characters [\d,]+ to [\d,]+ not indexed: the text makes more than "
                        r"20 chunks, the most one document makes$", why)
               for why in left.values()), left
    assert " to 300,000 not indexed" in left["line.txt"]
    assert len(capped.embedded) <= 20 + 20 + 1
    assert elapsed < 60, elapsed


async def test_an_upsert_text_over_the_chunk_limit_is_refused_with_the_limit_named(
        tmp_path: Path) -> None:
    config: Config = make_config(tmp_path, pipeline={"max_chunks_per_doc": 10})
    async with running(config, embedding=fake(config)) as rt:
        tools = Tools(rt)
        with refused(InvalidRequest, match=r"\(10 x CHUNK_SIZE\)"):
            await tools.add(("huge", "word " * 3_000))  # 15,000 characters > 10 x 1000
        with refused(InvalidRequest, match="more than 10 chunks"):
            await tools.add(("dense", _one_line(9_000)))  # fits by characters, not by chunks
        ids = await tools.add(("fine", "A short note about bicycles."))
        assert ids["fine"] > 0
        assert (await tools("status"))["documents"] == 1
