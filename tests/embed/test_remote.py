"""The remote client against a provider of our own on 127.0.0.1: the fake embedder's
vectors (these are tests of the client's logic), faults on demand."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest
from support.fake_embedder import FakeEmbedder
from support.provider_server import Fault, ProviderServer
from support.runtime import make_config, provider_embedding, remote_config, running

from pocketmcp.config import Config
from pocketmcp.embed import factory
from pocketmcp.embed.http import endpoint, retry_after
from pocketmcp.embed.remote import RemoteEmbedder
from pocketmcp.errors import InputRejected, ProviderRejected, ProviderUnavailable

TEXTS = [f"Note {i}: owls, bread, tides and the number {i}." for i in range(7)]


@pytest.fixture
def provider(fake_provider: ProviderServer) -> ProviderServer:
    """The test provider, with the fake embedder's vectors."""
    return fake_provider


def remote(config: Config) -> RemoteEmbedder:
    want = factory.wanted(config.embed)
    embedder = factory.make(config.embed, want, want.identity)
    assert isinstance(embedder, RemoteEmbedder)
    return embedder


async def embed(config: Config, texts: list[str] = TEXTS, *, query: bool = False) -> Any:
    embedder = remote(config)
    try:
        with anyio.fail_after(30):
            if query:
                return await embedder.embed_query(texts[0]), embedder
            return await embedder.embed_documents(texts), embedder
    finally:
        await embedder.aclose()


async def test_documents_come_back_in_order_in_requests_bounded_by_count_and_concurrency(
    tmp_path: Path, provider: ProviderServer, fake_embedder: FakeEmbedder
) -> None:
    config = remote_config(tmp_path, provider, embed={"batch_size": 3}, embed_concurrency="2")
    vectors, client = await embed(config)
    assert vectors.shape == (7, 384)
    expected = fake_embedder.embed(TEXTS)
    assert np.allclose(vectors, expected, atol=1e-5)  # the answer's `data` came reversed
    assert sorted(len(r.body["input"]) for r in provider.requests()) == [1, 3, 3]
    assert provider.most_in_flight <= 2
    assert client.usage.calls == 3 and client.usage.inputs == 7
    assert client.usage.tokens == sum(len(t.split()) for t in TEXTS)  # as the provider said


async def test_requests_are_bounded_by_tokens_too(tmp_path: Path,
                                                  provider: ProviderServer) -> None:
    long = [" ".join(["owl"] * 127) + f" {i}" for i in range(6)]  # 130 tokens each
    config = remote_config(tmp_path, provider, embed={"batch_tokens": 300})
    await embed(config, long)
    sizes = [len(r.body["input"]) for r in provider.requests()]
    assert sizes == [2, 2, 2]


async def test_a_429_is_retried_after_what_retry_after_says(tmp_path: Path,
                                                            provider: ProviderServer) -> None:
    provider.then(Fault(429, {"retry-after-ms": "300"}))  # as OpenAI says it, in ms
    started = time.perf_counter()
    vectors, client = await embed(remote_config(tmp_path, provider))
    assert time.perf_counter() - started >= 0.29  # the backoff alone would be 10 ms
    assert vectors.shape == (7, 384) and client.usage.retries == 1
    assert len(provider.requests()) == 2


async def test_5xx_malformed_answers_and_hangs_past_the_timeout_are_retried(
    tmp_path: Path, provider: ProviderServer
) -> None:
    provider.then(Fault(500), Fault(malformed=True), Fault(hang=True), Fault(503))
    config = remote_config(tmp_path, provider, embed={"retries": 4, "timeout_s": 0.5})
    vectors, client = await embed(config)
    assert vectors.shape == (7, 384)
    assert client.usage.retries == 4 and client.usage.failures == 0
    assert client.usage.seconds >= 0.5  # the hang was waited for up to the timeout


@pytest.mark.parametrize(("fault", "fix"), [
    (Fault(401), "OPENAI_API_KEY"),
    (Fault(404, body={"error": "model 'nope' not found"}), "EMBED_MODEL='all-minilm'"),
    (Fault(429, body={"error": {"message": "You exceeded your current quota",
                                "type": "insufficient_quota", "code": "insufficient_quota"}}),
     "quota"),
])
async def test_refusals_are_not_retried_and_name_the_setting_to_fix(
    tmp_path: Path, provider: ProviderServer, fault: Fault, fix: str
) -> None:
    provider.always = fault
    with pytest.raises(ProviderRejected, match=fix) as caught:
        await embed(remote_config(tmp_path, provider))
    assert caught.value.code == "EMBEDDING_REJECTED"
    assert len(provider.requests()) == 1


async def test_a_failed_call_takes_the_provider_down_and_calls_fail_at_once_until_retry_time(
    tmp_path: Path, provider: ProviderServer
) -> None:
    provider.always = Fault(503)
    # No retries, and down for base x 2 = 40 s: the next call comes well inside that time,
    # however busy the machine; the test then brings the retry time forward itself.
    client = remote(remote_config(tmp_path, provider, embed={"retries": 0,
                                                              "retry_base_s": 20.0}))
    try:
        with pytest.raises(ProviderUnavailable, match="503") as first:
            await client.embed_documents(TEXTS[:2])
        assert len(provider.requests()) == 1
        assert first.value.retry_in is not None and first.value.retry_in > 30
        started = time.perf_counter()
        with pytest.raises(ProviderUnavailable, match="tried again in"):
            await client.embed_query("owls")
        # at once, without asking the provider (not after the 40 s it is down)
        assert time.perf_counter() - started < 10 and len(provider.requests()) == 1
        provider.always = None
        assert client.usage.retry_at is not None
        client.usage.retry_at = time.time()  # the retry time has come
        assert client.usage.retry_in() is None
        assert (await client.embed_query("owls")).shape == (384,)
        assert client.usage.retry_in() is None and client.usage.failures == 1
    finally:
        await client.aclose()


async def test_vectors_of_another_dimension_are_refused_clearly(
    tmp_path: Path, provider: ProviderServer
) -> None:
    provider.always = Fault(dim=100)
    with pytest.raises(ProviderRejected, match=r"100-dimensional.*384.*EMBED_DIMENSIONS"):
        await embed(remote_config(tmp_path, provider))


async def test_a_text_the_provider_refuses_is_found_and_the_others_are_embedded(
    tmp_path: Path, provider: ProviderServer, fake_embedder: FakeEmbedder
) -> None:
    texts = [*TEXTS[:3], "POISON pill", *TEXTS[3:5]]
    client = remote(remote_config(tmp_path, provider))
    try:
        with pytest.raises(InputRejected) as caught:
            await client.embed_documents(texts)
    finally:
        await client.aclose()
    assert client.usage.failures == 0 and client.usage.retry_in() is None
    assert list(caught.value.rejected) == [3]
    good = [0, 1, 2, 4, 5]
    assert np.allclose(caught.value.vectors[good], fake_embedder.embed([texts[i] for i in good]),
                       atol=1e-5)
    assert not caught.value.vectors[3].any()


async def test_a_provider_that_refuses_every_text_is_a_setting_to_fix(
    tmp_path: Path, provider: ProviderServer
) -> None:
    provider.always = Fault(400, body={"error": {"message": "dimensions is not supported"}})
    with pytest.raises(ProviderRejected, match=r"dimensions is not supported.*EMBED_MODEL"):
        await embed(remote_config(tmp_path, provider))
    assert len(provider.requests()) == 4  # the batch, then three of its texts alone


async def test_ollamas_own_endpoint_with_nomic_prefixes(
    tmp_path: Path, provider: ProviderServer, fake_embedder: FakeEmbedder
) -> None:
    config = remote_config(tmp_path, provider, embed_provider="ollama",
                           embed_base_url=provider.url, embed_model="nomic-embed-text",
                           embed_dimensions="384")
    vectors, client = await embed(config, TEXTS[:2])
    query, _ = await embed(config, ["owls at night"], query=True)
    first, second = provider.requests("/api/embed")
    assert first.body == {"model": "nomic-embed-text", "truncate": True, "dimensions": 384,
                          "input": ["search_document: " + t for t in TEXTS[:2]]}
    assert second.body["input"] == ["search_query: owls at night"]
    assert np.allclose(vectors, fake_embedder.embed(first.body["input"]), atol=1e-5)
    assert np.allclose(query, fake_embedder.embed(second.body["input"])[0], atol=1e-5)
    assert client.usage.tokens == sum(len(t.split()) for t in first.body["input"])


async def test_the_api_key_is_sent_as_a_bearer_token_and_never_shown(
    tmp_path: Path, provider: ProviderServer, capfd: pytest.CaptureFixture[str]
) -> None:
    key = "sk-test-0123456789abcdef"
    provider.always = Fault(401, body={"error": {"message": f"Incorrect API key {key}"}})
    config = remote_config(tmp_path, provider, env={"MY_KEY": key},
                           embed_api_key_env="MY_KEY")
    assert key not in repr(config)
    with pytest.raises(ProviderRejected, match="MY_KEY") as caught:
        await embed(config)
    assert provider.requests()[0].headers["Authorization"] == f"Bearer {key}"
    assert key not in str(caught.value)
    assert key not in capfd.readouterr().err


def test_azure_urls_keep_their_api_version_and_take_the_key_as_api_key(tmp_path: Path) -> None:
    base = "https://res.openai.azure.com/openai/deployments/emb?api-version=2024-10-21"
    assert endpoint(base, "/embeddings") == (
        "https://res.openai.azure.com/openai/deployments/emb/embeddings?api-version=2024-10-21")

    config = make_config(tmp_path, {"OPENAI_API_KEY": "k1"}, embed_provider="openai",
                         embed_base_url=base, embed_model="text-embedding-3-small")
    client = remote(config)
    assert client._client.headers["api-key"] == "k1"
    assert "authorization" not in client._client.headers
    assert client.where == "https://res.openai.azure.com/openai/deployments/emb/embeddings"
    assert client.api.body(["a"], "passage")["encoding_format"] == "base64"


def test_retry_after_is_read_in_milliseconds_seconds_or_as_a_date() -> None:
    from email.utils import formatdate

    import httpx

    assert retry_after(httpx.Headers({"retry-after-ms": "250"})) == 0.25
    assert retry_after(httpx.Headers({"Retry-After": "3"})) == 3.0
    later = retry_after(httpx.Headers({"Retry-After": formatdate(time.time() + 30,
                                                                  usegmt=True)}))
    assert later is not None and 25 < later <= 30
    assert retry_after(httpx.Headers({"Retry-After": "soon"})) is None


async def test_a_model_of_unknown_dimensions_is_asked_once_and_the_index_records_the_answer(
    tmp_path: Path, provider: ProviderServer
) -> None:

    from pocketmcp.store.sqlite.reads import recorded_identity

    config = remote_config(tmp_path, provider, embed_model="house-embedder-v2")
    async with running(config, embedding=provider_embedding(config)) as rt:
        assert rt.services.identity.dim == 384
    assert provider.requests()[0].body["input"] == ["dimension probe"]
    recorded = recorded_identity(config.store.sqlite_path)
    assert recorded is not None and (recorded.model, recorded.dim) == ("house-embedder-v2", 384)
    provider.always = Fault(503)  # an index that records it starts without asking
    asked = len(provider.requests())
    async with running(config, embedding=provider_embedding(config)) as rt:
        assert rt.services.identity.dim == 384
    assert all(r.body["input"] != ["dimension probe"] for r in provider.requests()[asked:])


async def test_remote_chunks_fit_nine_tenths_of_the_window_less_the_document_prefix(
    tmp_path: Path, provider: ProviderServer
) -> None:
    from pocketmcp.core.chunking import Chunker

    nomic = {"embed_model": "nomic-embed-text", "embed_dimensions": "384"}
    client = remote(remote_config(tmp_path, provider, embed_max_tokens="100", **nomic))
    default = remote(remote_config(tmp_path, provider, **nomic))
    try:
        prefix = len(client.tokenizer.encode("search_document: ").ids) - 2
        assert prefix > 0 and client.max_tokens == 90 - prefix
        assert default.max_tokens == int(2048 * 0.9) - prefix  # nomic-embed-text's window
        chunker = Chunker(client.tokenizer, size=5000, overlap=0, max_tokens=client.max_tokens)
        text = " ".join(f"Tide table {i}: high water at {i % 12}:{i % 60:02} h."
                        for i in range(300))
        chunks = chunker.split(text)
        assert len(chunks) > 5
        counted = chunker.count(["search_document: " + c.text for c in chunks])
        assert max(counted) <= 90  # prefix included, within the margin the setting asks
    finally:
        await client.aclose()
        await default.aclose()
