"""The built-in provider: the bundled model behind the one embedder interface."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from pocketmcp.embed.local import LocalEmbedder


async def test_documents_and_queries_are_unit_vectors_of_the_model_dimension(
    embedder: LocalEmbedder
) -> None:
    docs = await embedder.embed_documents(["Owls hunt at night.", "Bread needs yeast."])
    query = await embedder.embed_query("nocturnal birds of prey")
    assert docs.shape == (2, embedder.dim) and query.shape == (embedder.dim,)
    assert np.allclose(np.linalg.norm(docs, axis=1), 1.0, atol=1e-5)
    assert np.isclose(np.linalg.norm(query), 1.0, atol=1e-5)
    assert float(docs[0] @ query) > float(docs[1] @ query) + 0.2  # meaning, not chance


async def test_a_text_embeds_the_same_as_a_document_and_as_a_query_alone_or_in_a_batch(
    embedder: LocalEmbedder
) -> None:
    # This model has no document or query prefixes, and its two sessions agree.
    text = "Tides follow the moon."
    alone = await embedder.embed_documents([text])
    batch = await embedder.embed_documents([text, "Something else entirely."])
    query = await embedder.embed_query(text)
    assert np.allclose(alone[0], batch[0], atol=1e-3)
    assert float(alone[0] @ query) > 0.999
    assert (await embedder.embed_documents([])).shape == (0, embedder.dim)


async def test_a_query_asked_again_is_not_embedded_again(
    embedder: LocalEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = await embedder.embed_query("which birds hunt at night?")
    calls: list[str] = []
    real = embedder._embed_query

    def counted(text: str) -> np.ndarray:
        calls.append(text)
        return real(text)

    monkeypatch.setattr(embedder, "_embed_query", counted)
    again = await embedder.embed_query("which birds hunt at night?")
    other = await embedder.embed_query("which birds sing at dawn?")
    assert again is first and not again.flags.writeable  # shared, so nobody may change it
    assert calls == ["which birds sing at dawn?"]
    assert float(other @ first) < 0.999


@pytest.mark.usefixtures("model_processes")
def test_the_built_in_model_answers_queries_before_its_documents_session_loads() -> None:
    # A server that only searches needs the tokenizer and the query session: fastembed
    # (about a second to import and load) waits for the first batch of documents.
    code = ("import sys; from pocketmcp.config import load; "
            "from pocketmcp.embed.local import LocalEmbedder; "
            "from pocketmcp.embed.models import ModelSpec; "
            "e = LocalEmbedder(ModelSpec(load({}, environ={}).embed)); "
            "q = e.embed_query_now('owls at night'); "
            "before = 'fastembed' in sys.modules; "
            "d = e.embed(['owls at night']); "
            "print(before, 'fastembed' in sys.modules, round(float(d[0] @ q), 3))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=True)
    assert done.stdout.split() == ["False", "True", "1.0"], done.stderr[-500:]


@pytest.mark.usefixtures("model_processes")
def test_the_built_in_model_starts_without_the_remote_providers_http_client() -> None:
    # httpx and the remote providers' modules are imported for a remote provider only: the
    # first search after start-up waits for every import on its way.
    code = ("import sys; import pocketmcp.runtime; from pocketmcp.config import load; "
            "from pocketmcp.embed import factory; "
            "c = load({}, environ={}).embed; w = factory.wanted(c); "
            "e = factory.make(c, w, w.identity); e.embed_query_now('owls at night'); "
            "print('httpx' in sys.modules, 'pocketmcp.embed.remote' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=True)
    assert done.stdout.split() == ["False", "False"], done.stderr[-500:]
