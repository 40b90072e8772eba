"""The suite's fixtures. What they are made of (settings, runtimes, the tools' client, the
fake embedder, servers) lives in the `support` package; the lanes (marks that follow from
these fixtures), the one-second rule and the skips allowed on CI in `support/lanes.py`."""

from __future__ import annotations

import os
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import pytest
from support.fake_embedder import FakeEmbedder
from support.index import Index, Watching
from support.pg_server import MISSING, backend, drop_schemas, local_postgres, new_schema
from support.processes import KEYS, provider_settings, started
from support.provider_server import ProviderServer, provider_server
from support.runtime import fake, make_config, running, shared
from support.tools import Tools

from pocketmcp.config import Config, load
from pocketmcp.core.chunking import Chunker
from pocketmcp.embed.local import LocalEmbedder
from pocketmcp.embed.models import ModelSpec
from pocketmcp.runtime import Runtime

pytest_plugins = ["support.lanes"]

# Indexes kept by the rule (one per folder in the user data folder) go to a folder of this
# run, never the user's: a test that names no SQLITE_PATH, and the processes it starts.
os.environ["XDG_DATA_HOME"] = tempfile.mkdtemp(prefix="pocketmcp-data-")
# A stdio server a test starts serves on its own, unless the test asks it to share (a shared
# server is a process of its own, outliving the test by SERVER_IDLE_EXIT_S).
os.environ.setdefault("SHARE", "off")


@pytest.fixture(scope="session", autouse=True)
def hypothesis_tables() -> None:
    """Hypothesis builds its Unicode tables the first time a test draws text (about a second
    in a fresh clone; kept in .hypothesis/ after): built here, once a run, so that no test
    pays for them."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    @settings(max_examples=1, database=None)
    @given(st.text(min_size=1))
    def draw(text: str) -> None:
        assert text

    draw()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def config(tmp_path: Path) -> Config:
    return make_config(tmp_path)


@pytest.fixture
def write(config: Config) -> Callable[[str, str], Path]:
    def _write(rel: str, text: str) -> Path:
        path = config.watched.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return path

    return _write


@pytest.fixture
def chdir_tmp(tmp_path: Path) -> Iterator[Path]:
    old = Path.cwd()
    os.chdir(tmp_path)
    try:
        yield tmp_path
    finally:
        os.chdir(old)


# -- embedders ---------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def embedder() -> LocalEmbedder:
    """The real bundled model, loaded once per test run: a runtime gets it through
    `embedding=shared(embedder, config)` (support/runtime.py)."""
    return LocalEmbedder(ModelSpec(load({}, environ={}).embed))


@pytest.fixture(scope="session")
def fake_embedder() -> FakeEmbedder:
    """The deterministic embedder (support/fake_embedder.py): for tests of logic."""
    return FakeEmbedder()


@pytest.fixture
def provider(embedder: LocalEmbedder) -> Iterator[ProviderServer]:
    """A fault-injecting embedding provider on 127.0.0.1 with the built-in model's vectors."""
    with provider_server(embedder.embed, refuse="POISON") as server:
        yield server


@pytest.fixture
def fake_provider(fake_embedder: FakeEmbedder) -> Iterator[ProviderServer]:
    """The same provider with the fake embedder's vectors (384 dimensions, as all-minilm's):
    for tests of what the pipeline and the tools do when a provider fails."""
    with provider_server(fake_embedder.embed, refuse="POISON") as server:
        yield server


@pytest.fixture
def provider_back_soon(monkeypatch: pytest.MonkeyPatch) -> None:
    """A provider back from failing is tried again within 50 ms, not after the doubling wait
    (up to a minute) meant for a real outage: for tests that wait on it."""
    from pocketmcp.embed import remote

    monkeypatch.setattr(remote, "MAX_DOWN_S", 0.05)


@pytest.fixture
def polled_searches(monkeypatch: pytest.MonkeyPatch) -> None:
    """Indexing gives way to a search in flight at most 10 ms a step (GIVE_WAY_S), not half a
    second: for tests that poll with searches while it indexes."""
    from pocketmcp.pipeline.precedence import Precedence

    monkeypatch.setattr(Precedence.give_way, "__defaults__", (0.01,))


@pytest.fixture(scope="session")
def real_chunker(embedder: LocalEmbedder) -> Chunker:
    return Chunker(embedder.tokenizer, size=1000, overlap=120, max_tokens=embedder.max_tokens)


@pytest.fixture(scope="session")
def fake_chunker(fake_embedder: FakeEmbedder) -> Chunker:
    """Chunks as `real_chunker` cuts them: the same tokenizer and window."""
    return Chunker(fake_embedder.tokenizer, size=1000, overlap=120,
                   max_tokens=fake_embedder.max_tokens)


# -- an index driven by the pipeline directly --------------------------------------------------

@pytest.fixture
def index(config: Config, embedder: LocalEmbedder, real_chunker: Chunker) -> Index:
    """The real model's index."""
    return Index(config, embedder, real_chunker)


@pytest.fixture
def fake_index(config: Config, fake_embedder: FakeEmbedder, fake_chunker: Chunker) -> Index:
    """The fake embedder's index."""
    return Index(config, fake_embedder, fake_chunker)


@pytest.fixture
async def watching(fake_index: Index) -> AsyncIterator[Watching]:
    """A live pipeline on the watched folder, with the fake embedder."""
    writer = fake_index.writer()
    pipeline = fake_index.pipeline(writer, follow=True)
    watch = Watching(fake_index, pipeline, writer)
    fake_index.on_event = watch.on_event  # type: ignore[method-assign]
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(watch.run, name="test.pipeline")
            with anyio.fail_after(60):
                await pipeline.scan_done.wait()
            yield watch
            pipeline.stop()
    finally:
        writer.close()


# -- processes ---------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def process_provider(fake_embedder: FakeEmbedder) -> Iterator[ProviderServer]:
    """The provider the processes of every test embed through: the fake embedder's vectors."""
    with provider_server(fake_embedder.embed) as server:
        yield server


@contextmanager
def _fake_processes(url: str) -> Iterator[dict[str, str]]:
    settings = provider_settings(url)
    with pytest.MonkeyPatch.context() as patch, started("fake"):
        for key, value in settings.items():
            patch.setenv(key, value)
        yield settings


@pytest.fixture
def processes(process_provider: ProviderServer) -> Iterator[dict[str, str]]:
    """This test starts pocketmcp processes: they embed through the test provider with the
    fake embedder's vectors (support/processes.py). Their settings, which every process the
    test starts inherits; in-process runtimes on the same index use them too
    (`make_config(tmp_path, processes)`)."""
    with _fake_processes(process_provider.url) as settings:
        yield settings


@pytest.fixture(scope="module")
def module_processes(process_provider: ProviderServer) -> Iterator[dict[str, str]]:
    """`processes` for a fixture of the module's (a server its tests share)."""
    with _fake_processes(process_provider.url) as settings:
        yield settings


@pytest.fixture
def model_processes(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
                    ) -> Iterator[dict[str, str]]:
    """This test starts pocketmcp processes that run the real model: only the tests named in
    REAL_MODEL_PROCESSES (support/lanes.py), each with its reason."""
    from support.lanes import real_model_reason  # a plugin: imported by pytest first

    real_model_reason(request.node)
    for key in KEYS:
        monkeypatch.delenv(key, raising=False)
    with started("model"):
        yield {}


# -- a runtime and its tools -------------------------------------------------------------------

@pytest.fixture
async def service(tmp_path: Path, embedder: LocalEmbedder) -> AsyncIterator[Runtime]:
    """A serving runtime on the real model."""
    config = make_config(tmp_path)
    async with running(config, embedding=shared(embedder, config)) as rt:
        yield rt


@pytest.fixture
async def fake_service(config: Config) -> AsyncIterator[Runtime]:
    """A serving runtime on the fake embedder."""
    async with running(config, embedding=fake(config)) as rt:
        yield rt


@pytest.fixture
async def tools(service: Runtime) -> AsyncIterator[Tools]:
    async with Tools(service) as tools:
        yield tools


@pytest.fixture
async def fake_tools(fake_service: Runtime) -> AsyncIterator[Tools]:
    async with Tools(fake_service) as tools:
        yield tools


# -- Postgres: one server per session, a schema per test ---------------------------------------

@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """The URL of a PostgreSQL 18 + pgvector server started for this session (skipped, with
    the reason, only when the server wheel is not installed; under CI=true that fails)."""
    if backend() is None:
        if os.environ.get("CI") == "true":  # CI installs it: the tests must run there
            pytest.fail(MISSING)
        pytest.skip(MISSING)
    with local_postgres(Path(tempfile.mkdtemp(prefix="pg-"))) as url:
        yield url


@pytest.fixture
def pg_schema(pg_url: str) -> Iterator[str]:
    """A schema of this test's own, dropped after it with every schema named after it
    (`<name>_...`: its named databases, and other indexes a test makes beside it)."""
    name = new_schema()
    yield name
    drop_schemas(pg_url, name)


@pytest.fixture(params=["sqlite", "postgres"])
def store_env(request: pytest.FixtureRequest) -> dict[str, str]:
    """The settings of each store in turn: none for SQLite (the default), then this test's
    own schema on the session's Postgres."""
    if request.param == "sqlite":
        return {}
    return {"STORE": "postgres", "DATABASE_URL": request.getfixturevalue("pg_url"),
            "PG_SCHEMA": request.getfixturevalue("pg_schema")}
