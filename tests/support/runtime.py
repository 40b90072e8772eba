"""Settings for a test's index, and a runtime over them."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import msgspec

from pocketmcp.config import Config, load
from pocketmcp.embed.base import Batching
from pocketmcp.plans import Plan, serving
from pocketmcp.runtime import Runtime, open_runtime
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
