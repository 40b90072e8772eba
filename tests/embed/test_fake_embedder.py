"""The deterministic embedder the tests of logic use (support/fake_embedder.py) keeps the
promises of the embedder interface (embed/base.py) and its own."""

from __future__ import annotations

import numpy as np
from support.fake_embedder import MODEL, PROVIDER, FakeEmbedder, FakeEmbedding, vector_of

from pocketmcp.config import load
from pocketmcp.core.chunking import Chunker
from pocketmcp.embed import factory


async def test_the_same_text_gives_the_same_unit_vector_and_rows_keep_their_order() -> None:
    embedder = FakeEmbedder()
    texts = ["Owls hunt at night.", "Bread needs yeast.", ""]
    rows = await embedder.embed_documents(texts)
    assert rows.shape == (3, embedder.dim) and rows.dtype == np.float32
    assert np.allclose(np.linalg.norm(rows[:2], axis=1), 1.0)
    assert not rows[2].any()  # no word, no direction
    assert np.array_equal(rows[0], vector_of("Owls hunt at night."))
    assert np.array_equal(await embedder.embed_query("Owls hunt at night."), rows[0])
    assert (embedder.usage.calls, embedder.usage.inputs) == (2, 4)


def test_shared_words_and_related_forms_point_the_same_way() -> None:
    bikes = vector_of("Patch the inner tube of a bicycle tyre.")
    assert bikes @ vector_of("repair a bicycle tyre") > 0.4
    assert vector_of("bicycles") @ vector_of("bicycle") > 0.3
    assert abs(bikes @ vector_of("Sourdough rises with wild yeast.")) < 0.2


async def test_its_identity_is_no_real_providers_and_the_source_gives_it_whatever_is_stored(
) -> None:
    source = FakeEmbedding()
    identity = await source.identity(None)
    assert (identity.provider, identity.model) == (PROVIDER, MODEL)
    real = factory.wanted(load({}, environ={}).embed).identity
    assert await source.identity(real) == identity != real
    assert source.make(identity).identity == identity and len(source.made) == 1


def test_its_chunks_are_the_real_models(fake_chunker: Chunker, real_chunker: Chunker) -> None:
    """What lets tests of chunking run on the fake embedder: the same tokenizer, the same
    window, so the same chunks."""
    text = ("# Harbour log\n\n## Tides\n\n" + "\n\n".join(
        f"Day {i}: the tide turned at {i % 12}:{i % 60:02} and the ferry waited. 潮の満ち引き。"
        for i in range(200)) + "\n" + "x" * 3000)
    assert fake_chunker.split(text) == real_chunker.split(text)
    assert fake_chunker.max_tokens == real_chunker.max_tokens
