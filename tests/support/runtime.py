"""Settings for a test's index, and a runtime over them with the embedder the test chose:
the fake one (`fake`), the run's real model (`shared`), or the settings' remote provider
(`provider_embedding`)."""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import msgspec

from pocketmcp.config import Config, load
from pocketmcp.core.identity import LOCAL, Identity
from pocketmcp.embed import factory
from pocketmcp.embed.base import F32, Batching, EmbedderSource, Usage
from pocketmcp.embed.local import LocalEmbedder
from pocketmcp.plans import Plan, serving
from pocketmcp.runtime import Runtime, open_runtime
from pocketmcp.store.sqlite.writes import SqliteWriter
from support.fake_embedder import FakeEmbedding
from support.provider_server import ProviderServer


def make_config(tmp_path: Path, env: Mapping[str, str] | None = None, **changes: Any
                ) -> Config:
    """Settings for an index in `tmp_path` fed from its folder `kb`. `changes`: settings by
    their variable's name in lower case (`chunk_size="700"`), and a part's fields set directly
    by the part's name (`embed={"retries": 0}`: constants and derived values)."""
    kb = tmp_path / "kb"
    kb.mkdir(exist_ok=True)
    environ = {"SQLITE_PATH": str(tmp_path / "data" / "index.db"), "WATCH_DIR": str(kb),
               "DEBOUNCE_MS": "50", **(env or {})}
    if "XDG_CACHE_HOME" in os.environ:  # where the model is unpacked, shared by the tests
        environ.setdefault("XDG_CACHE_HOME", os.environ["XDG_CACHE_HOME"])
    parts = {name: changes.pop(name) for name in list(changes) if isinstance(changes[name], dict)}
    config = load({name.upper(): value for name, value in changes.items()}, environ=environ)
    return with_fields(config, **parts)


def with_fields(config: Config, **parts: Mapping[str, Any]) -> Config:
    """`config` with fields of its parts set directly (`embed={"retries": 0}`)."""
    return msgspec.structs.replace(config, **{
        name: msgspec.structs.replace(getattr(config, name), **fields)
        for name, fields in parts.items()})


# Remote providers in tests: short backoffs, so faults resolve in moments; the timeout is
# generous (a loaded machine is slow), tests of hangs set their own.
FAST_RETRIES = {"timeout_s": 10.0, "retries": 2, "retry_base_s": 0.01}


def remote_config(tmp_path: Path, server: ProviderServer, env: Mapping[str, str] | None = None,
                  **changes: Any) -> Config:
    """Settings for the test provider at `server`: OpenAI's API, the built-in model's
    vectors (all-minilm: 384 dimensions, no prefixes)."""
    embed = {**FAST_RETRIES, **changes.pop("embed", {})}
    settings = {"embed_provider": "openai", "embed_base_url": server.url + "/v1",
                "embed_model": "all-minilm", **changes}
    return make_config(tmp_path, env, embed=embed, **settings)


def fake(config: Config) -> FakeEmbedding:
    """The deterministic embedder, batched as `config` asks (what `embedding=` takes)."""
    return FakeEmbedding(Batching(size=config.embed.batch_size,
                                  tokens=config.embed.batch_tokens))


class ModelView:
    """The run's real model as one runtime's embedder: counts and batching of its own, the
    model (loaded once per run) shared; closing it leaves the model loaded."""

    def __init__(self, model: LocalEmbedder, batching: Batching) -> None:
        self._model = model
        self.identity = model.identity
        self.model_id = model.model_id
        self.dim = model.dim
        self.max_tokens = model.max_tokens
        self.tokenizer = model.tokenizer
        self.batching = batching
        self.usage = Usage()
        self.where: str | None = None
        self.model_state = model.model_state

    async def embed_documents(self, texts: list[str]) -> F32:
        started = time.perf_counter()
        try:
            return await self._model.embed_documents(texts)
        finally:
            self.usage.answered(len(texts), started)

    async def embed_query(self, text: str) -> F32:
        started = time.perf_counter()
        try:
            return await self._model.embed_query(text)
        finally:
            self.usage.answered(1, started)

    async def load_documents(self) -> None:
        await self._model.load_documents()

    async def aclose(self) -> None:
        pass  # the model outlives the runtime


class SharedModel:
    """The `EmbedderSource` of the run's real model (the `embedder` fixture), batched as a
    runtime's settings ask."""

    def __init__(self, model: LocalEmbedder, batching: Batching) -> None:
        self._model = model
        self._batching = batching

    async def identity(self, stored: Identity | None) -> Identity:
        return self._model.identity

    def make(self, identity: Identity) -> ModelView:
        return ModelView(self._model, self._batching)


def shared(model: LocalEmbedder, config: Config) -> SharedModel:
    """The run's real model for a runtime on `config` (what `embedding=` takes)."""
    return SharedModel(model, Batching(size=config.embed.batch_size,
                                       tokens=config.embed.batch_tokens))


def own_model(config: Config) -> EmbedderSource:
    """The settings' built-in model, made for one runtime only: for tests of the model's own
    life in a runtime (when it loads, unloads); they ask for the `embedder` fixture too,
    which marks them."""
    assert config.embed.provider == LOCAL, "a remote provider: provider_embedding(config)"
    return factory.Embedding(config.embed)


def provider_embedding(config: Config) -> EmbedderSource:
    """The settings' own embedder, as production makes it, for settings that name a remote
    provider (a test provider on 127.0.0.1): the real model is `shared`."""
    assert config.embed.provider != LOCAL, "the real model: shared(embedder, config)"
    return factory.Embedding(config.embed)


@asynccontextmanager
async def running(config: Config, plan: Plan | None = None, *, embedding: EmbedderSource,
                  **kw: Any) -> AsyncIterator[Runtime]:
    """A runtime (model, index; no folder watching unless the plan says so) until the block
    ends, ready when the block starts, with the embedder the test chose: `fake(config)`,
    `shared(embedder, config)` or `provider_embedding(config)`."""
    async with open_runtime(config, plan or serving(False), embedding=embedding, **kw) as rt:
        with anyio.fail_after(60):
            await rt.started()
        yield rt


async def vector_file_settled(rt: Runtime) -> None:
    """Until the main index's vector file holds every commit: the check that runs in the
    background from the start leaves the commits made meanwhile to its end, where it
    appends their rows (a SQLite index)."""
    pipeline = rt.services.main.pipeline
    assert pipeline is not None
    writer = pipeline.writer._writer
    assert isinstance(writer, SqliteWriter)
    vectors = writer.vectors

    def settled() -> None:
        give_up = time.monotonic() + 30
        while vectors.wants_repair or not vectors._idle.wait(0.01):
            assert time.monotonic() < give_up, "the vector file's check never ended"
            time.sleep(0.01)

    await anyio.to_thread.run_sync(settled)
