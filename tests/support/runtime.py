"""Settings for a test's index, and a runtime over them."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio

from pocketmcp.config import Config, load
from pocketmcp.embed.base import Batching
from pocketmcp.plans import Plan, serving
from pocketmcp.runtime import Runtime, open_runtime
from support.fake_embedder import FakeEmbedding
from support.provider_server import ProviderServer


def make_config(tmp_path: Path, env: Mapping[str, str] | None = None, **changes: Any
                ) -> Config:
    kb = tmp_path / "kb"
    kb.mkdir(exist_ok=True)
    environ = {"SQLITE_PATH": str(tmp_path / "data" / "index.db"), "WATCH_DIR": str(kb),
               "DEBOUNCE_MS": "50", "POCKETMCP_CACHE": os.environ.get(
                   "POCKETMCP_TEST_CACHE", str(Path.home() / ".cache" / "pocketmcp")),
               **(env or {})}
    return load(changes, environ=environ)


# Remote providers in tests: short backoffs, so faults resolve in moments; the timeout is
# generous (a loaded machine is slow), tests of hangs set their own.
FAST_RETRIES = {"embed_timeout_s": "10", "embed_retries": "2", "embed_retry_base_s": "0.01"}


def remote_config(tmp_path: Path, server: ProviderServer, env: Mapping[str, str] | None = None,
                  **changes: Any) -> Config:
    """Settings for the test provider at `server`: OpenAI's API, the built-in model's
    vectors (all-minilm: 384 dimensions, no prefixes)."""
    settings = {"embed_provider": "openai", "embed_base_url": server.url + "/v1",
                "embed_model": "all-minilm", **FAST_RETRIES, **changes}
    return make_config(tmp_path, env, **settings)


def fake(config: Config) -> FakeEmbedding:
    """The deterministic embedder, batched as `config` asks (what `embedding=` takes)."""
    return FakeEmbedding(Batching(size=config.embed_batch_size,
                                  tokens=config.embed_batch_tokens))


@asynccontextmanager
async def running(config: Config, plan: Plan | None = None, **kw: Any
                  ) -> AsyncIterator[Runtime]:
    """A runtime (model, index; no folder watching unless the plan says so) until the block
    ends, ready when the block starts. The settings' embedder unless `embedding=` gives one
    (`fake(config)`: the deterministic one)."""
    async with open_runtime(config, plan or serving(False), **kw) as rt:
        with anyio.fail_after(60):
            await rt.started()
        yield rt
