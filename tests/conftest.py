from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from provider_server import ProviderServer, provider_server

from pocketmcp.config import Config, load
from pocketmcp.convert.pool import Converter
from pocketmcp.core.chunking import Chunker
from pocketmcp.embed.local import LocalEmbedder
from pocketmcp.embed.models import ModelSpec
from pocketmcp.errors import PocketError
from pocketmcp.mcp.server import build_server
from pocketmcp.pipeline.supervisor import Pipeline
from pocketmcp.pipeline.writer import WriterActor
from pocketmcp.plans import Plan, serving
from pocketmcp.runtime import Runtime, open_runtime
from pocketmcp.store.sqlite.writes import SqliteWriter

SHARED = Path(__file__).resolve().parents[2] / "shared"
# pg_url (one Postgres server per session) and pg_schema (one schema per test).
pytest_plugins = ["pg_fixtures"]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


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


@pytest.fixture
def config(tmp_path: Path) -> Config:
    return make_config(tmp_path)


@pytest.fixture(scope="session")
def embedder() -> LocalEmbedder:
    """The real bundled model, loaded once per test session."""
    return LocalEmbedder(ModelSpec(load({}, environ={}).embed_settings()))


@pytest.fixture
def provider(embedder: LocalEmbedder) -> Iterator[ProviderServer]:
    """A fault-injecting embedding provider on 127.0.0.1 with the built-in model's vectors."""
    with provider_server(embedder.embed, refuse="POISON") as server:
        yield server


@pytest.fixture(scope="session")
def real_chunker(embedder: LocalEmbedder) -> Chunker:
    return Chunker(embedder.tokenizer, size=1000, overlap=120, max_tokens=embedder.max_tokens)


class Index:
    """A test's index: the real writer and model, with helpers to run the pipeline."""

    def __init__(self, config: Config, embedder: LocalEmbedder, chunker: Chunker) -> None:
        self.config = config
        self.embedder = embedder
        self.chunker = chunker
        self.embedded: list[str] = []
        self.events: list[dict[str, Any]] = []

    @property
    def kb(self) -> Path:
        return self.config.watch_dir

    async def embed(self, texts: list[str]) -> np.ndarray:
        self.embedded.extend(texts)
        return await self.embedder.embed_documents(texts)

    def writer(self) -> SqliteWriter:
        return SqliteWriter(self.config.sqlite_path, self.embedder.identity)

    def pipeline(self, writer: SqliteWriter, *, follow: bool, **kw: Any) -> Pipeline:
        kw.setdefault("converter", Converter(self.config.convert_limits()))
        actor = WriterActor(writer, queue_size=self.config.queue_size,
                            batch_files=self.config.write_batch_files,
                            on_event=lambda event: self.on_event(event))
        return Pipeline(self.config.pipeline_settings(), writer=actor,
                        feed="follow" if follow else "scan",
                        embed=self.embed, dim=self.embedder.dim, chunker=self.chunker,
                        accept_requests=follow, **kw)

    def on_event(self, event: dict[str, Any]) -> None:
        self.events.append(event)

    async def index_once(self, **kw: Any) -> Pipeline:
        """One scan of the folder, like `pocketmcp index`."""
        self.embedded.clear()
        self.events.clear()
        writer = self.writer()
        try:
            pipeline = self.pipeline(writer, follow=False, **kw)
            with anyio.fail_after(120):
                await pipeline.run()
        finally:
            writer.close()
            assert pipeline.converter is not None
            await pipeline.converter.aclose()
        return pipeline

    def text_of(self, rel: str) -> str:
        """The chunk texts stored for a file, joined."""
        from pocketmcp.store.sqlite.connect import open_sync_reader

        conn = open_sync_reader(self.config.sqlite_path)
        try:
            rows = conn.execute(
                "SELECT v.text FROM vec_chunks v JOIN documents d ON d.doc_id = v.doc_id "
                "WHERE d.external_id = ? ORDER BY v.idx", ("file:" + rel,)).fetchall()
        finally:
            conn.close()
        return "\n".join(r[0] for r in rows)

    def search(self, query: str, k: int = 5) -> list[str]:
        from pocketmcp.store.sqlite.queries import SqliteReader

        reader = SqliteReader(self.config.sqlite_path)
        try:
            vector = self.embedder.embed_query_now(query)
            hits = reader.search_vector(vector.tobytes(), k)
        finally:
            reader.close()
        paths: list[str] = []
        for hit in hits:
            path = hit.external_id.removeprefix("file:")
            if path not in paths:
                paths.append(path)
        return paths


@pytest.fixture
def index(config: Config, embedder: LocalEmbedder, real_chunker: Chunker) -> Index:
    return Index(config, embedder, real_chunker)


@pytest.fixture
def write(config: Config) -> Callable[[str, str], Path]:
    def _write(rel: str, text: str) -> Path:
        path = config.watch_dir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return path

    return _write


class Watching:
    """A live pipeline in a task group; tests wait on its events, never on the clock."""

    def __init__(self, index: Index, pipeline: Pipeline, writer: SqliteWriter) -> None:
        self.index = index
        self.writer = writer
        self.pipeline = pipeline
        self._returned: set[int] = set()
        self._changed = anyio.Event()
        self.done = anyio.Event()

    async def run(self) -> None:
        try:
            await self.pipeline.run()
        finally:
            self.done.set()

    def on_event(self, event: dict[str, Any]) -> None:
        self.index.events.append(event)
        self._changed.set()
        self._changed = anyio.Event()

    async def wait_for(self, predicate: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        """The first event not returned before that matches, waiting for it if need be."""
        with anyio.fail_after(20):
            while True:
                for i, event in enumerate(self.index.events):
                    if i not in self._returned and predicate(event):
                        self._returned.add(i)
                        return event
                await self._changed.wait()


@pytest.fixture
async def watching(index: Index) -> AsyncIterator[Watching]:
    writer = index.writer()
    pipeline = index.pipeline(writer, follow=True)
    watch = Watching(index, pipeline, writer)
    index.on_event = watch.on_event  # type: ignore[method-assign]
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(watch.run, name="test.pipeline")
            with anyio.fail_after(60):
                await pipeline.scan_done.wait()
            yield watch
            pipeline.stop()
    finally:
        writer.close()


@pytest.fixture
def chdir_tmp(tmp_path: Path) -> Iterator[Path]:
    old = Path.cwd()
    os.chdir(tmp_path)
    try:
        yield tmp_path
    finally:
        os.chdir(old)


@asynccontextmanager
async def running(config: Config, plan: Plan | None = None, **kw: Any
                  ) -> AsyncIterator[Runtime]:
    """A runtime (model, index; no folder watching unless the plan says so) until the block
    ends, ready when the block starts."""
    async with open_runtime(config, plan or serving(False), **kw) as rt:
        with anyio.fail_after(60):
            await rt.started()
        yield rt


class Tools:
    """The server's tools called in process, as a client calls them: arguments validated by
    their schemas, results rendered. A tool error raises the PocketError behind it."""

    def __init__(self, rt: Runtime) -> None:
        self.rt = rt
        self.server: MCPServer = build_server(rt)

    async def __call__(self, tool: str, **args: Any) -> dict[str, Any]:
        try:
            result = await self.server.call_tool(tool, args)
        except ToolError as exc:
            cause: BaseException | None = exc
            while cause is not None and not isinstance(cause, PocketError):
                cause = cause.__cause__
            if cause is not None:
                raise cause from None
            raise
        assert result.structured_content is not None, result
        return result.structured_content

    async def search(self, query: str, **args: Any) -> list[dict[str, Any]]:
        """The matches of a `search` call."""
        matches: list[dict[str, Any]] = (await self("search", query=query, **args))["matches"]
        return matches

    async def add(self, *docs: tuple[str, str], **args: Any) -> dict[str, int]:
        """upsert_documents of (external_id, text) pairs; their doc_ids by external id."""
        result = await self("upsert_documents", docs=[
            {"text": text, "external_id": ext} for ext, text in docs], **args)
        return {r["external_id"]: r["doc_id"] for r in result["results"]}


@pytest.fixture
async def service(tmp_path: Path) -> AsyncIterator[Runtime]:
    async with running(make_config(tmp_path)) as rt:
        yield rt


@pytest.fixture
async def tools(service: Runtime) -> Tools:
    return Tools(service)
