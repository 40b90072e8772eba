"""Automatic sharing with real processes: editors start `pocketmcp` on stdio, the first one
starts the shared HTTP server of the index in the background, and every one relays to it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession
from mcp.shared.exceptions import MCPError
from support.mcp_harness import call, index_of, mcp_session, server_env, until
from support.processes import provider_settings
from support.provider_server import Fault, ProviderServer

from pocketmcp.mcp import discovery, sharing
from pocketmcp.mcp.relay import READ_TOOLS

SHARED = {"SHARE": "on", "SERVER_IDLE_EXIT_S": "2"}


def alive(pid: int) -> bool:
    return discovery.alive(pid)


def starts(root: Path) -> int:
    """How many times a shared server was started for the index (its log says each)."""
    path = sharing.log_file(index_of(root))
    return path.read_text().count("--- started") if path.exists() else 0


async def gone(pid: int, within_s: float) -> bool:
    async def running() -> bool:
        return alive(pid)

    try:
        await until(running, lambda up: not up, within_s)
    except TimeoutError:
        return False
    return True


async def search(session: ClientSession, query: str = "green tea") -> dict[str, Any]:
    return await call(session, "search", {"query": query, "top_k": 1})


def published(root: Path) -> discovery.Published:
    found = discovery.find(index_of(root))
    assert found is not None
    return found


@pytest.mark.usefixtures("model_processes")
async def test_two_editors_starting_at_once_start_exactly_one_server(root: Path) -> None:
    answers: dict[str, dict[str, Any]] = {}
    both = anyio.Event()

    async def editor(name: str) -> None:
        async with mcp_session(root, stderr_name=f"{name}.err", **SHARED) as session:
            answers[name] = await search(session)
            if len(answers) == 2:
                both.set()
            await both.wait()  # both attached at once

    with anyio.fail_after(120):
        async with anyio.create_task_group() as tg:
            tg.start_soon(editor, "one")
            tg.start_soon(editor, "two")
        server = published(root)
        for name in ("one", "two"):
            assert answers[name]["matches"][0]["path"] == "tea.md"
            text = (root / f"{name}.err").read_text()
            assert '"bridging"' in text and server.url in text, text[-2000:]
        assert starts(root) == 1
        # Detached from the editors: a session of its own, its output in the log beside the
        # index.
        assert os.getsid(server.pid) == server.pid != os.getsid(0)
        assert '"serving"' in sharing.log_file(index_of(root)).read_text()
        # Its clients gone, the server exits once SERVER_IDLE_EXIT_S have passed.
        assert await gone(server.pid, 30), "the idle shared server did not exit"
    assert discovery.find(index_of(root)) is None
    assert '"idle_exit"' in sharing.log_file(index_of(root)).read_text()


@pytest.mark.usefixtures("processes")
async def test_a_server_killed_with_sigkill_is_replaced_at_the_next_request(
        root: Path) -> None:
    with anyio.fail_after(180):
        async with mcp_session(root, stderr_name="one.err", **SHARED) as one, \
                mcp_session(root, stderr_name="two.err", **SHARED) as two:
            await search(one)
            await search(two)
            first = published(root)
            os.kill(first.pid, signal.SIGKILL)
            assert await gone(first.pid, 10)
            # Nothing can start meanwhile (its log file's place is taken): a clear error.
            log = sharing.log_file(index_of(root))
            log.rename(log.with_name("kept.log"))
            log.mkdir()
            with pytest.raises(MCPError, match="none could be started") as refused:
                await one.call_tool("search", {"query": "green tea"})
            assert refused.value.error.code == -32000
            log.rmdir()
            # The next request starts a new server, and both editors go on with it.
            again = await search(one)
            assert again["matches"][0]["path"] == "tea.md"
            second = published(root)
            assert second.pid != first.pid
            assert (await search(two))["matches"][0]["path"] == "tea.md"
            await call(two, "upsert_documents", {"docs": [
                {"text": "Oolong is partly oxidised.", "external_id": "oolong"}]})
            found = (await search(one, "partly oxidised oolong"))["matches"]
            assert found and found[0]["doc_id"] is not None
    assert await gone(second.pid, 30)


@pytest.mark.usefixtures("processes")
async def test_an_editor_started_server_stays_while_a_client_is_attached(root: Path) -> None:
    with anyio.fail_after(120):
        async with mcp_session(root, stderr_name="one.err", SHARE="on",
                               SERVER_IDLE_EXIT_S="1") as session:
            await search(session)
            server = published(root)
            started = anyio.current_time()
            # Meanwhile the user would serve the index over HTTP: the editor's server is
            # named, with when it goes and how to stop it.
            refused = await anyio.to_thread.run_sync(lambda: subprocess.run(
                [sys.executable, "-m", "pocketmcp", "serve", "--transport", "http"],
                env=server_env(root, SERVER_IDLE_EXIT_S="1"), capture_output=True, text=True,
                timeout=60))
            assert refused.returncode == 1, refused.stderr
            assert "ALREADY_SERVING: the server an editor started" in refused.stderr
            assert f"kill {server.pid}" in refused.stderr and "SERVER_IDLE_EXIT_S" in (
                refused.stderr)
            # idle, attached: four times the idle time
            await anyio.sleep(max(0.0, 4 - (anyio.current_time() - started)))
            assert alive(server.pid)
            status = await call(session, "status")
            assert status["sharing"]["serving"] == "shared"
            assert status["sharing"]["clients"] == 1
            assert (await search(session))["matches"][0]["path"] == "tea.md"
        assert await gone(server.pid, 15)


@pytest.mark.usefixtures("processes")
async def test_a_server_the_user_started_stays_after_its_clients(root: Path) -> None:
    from support.mcp_harness import start_http, stop_http

    served = start_http(root, SERVER_IDLE_EXIT_S="1")
    try:
        with anyio.fail_after(60):
            async with mcp_session(root, stderr_name="one.err", **SHARED) as session:
                assert (await search(session))["matches"][0]["path"] == "tea.md"
            await anyio.sleep(3)
            assert served.process.poll() is None
            assert starts(root) == 0  # the editor relayed to it, started nothing
    finally:
        assert stop_http(served) == 0


@pytest.mark.usefixtures("processes")
def test_a_bridge_imports_neither_the_mcp_sdk_nor_pydantic() -> None:
    """What keeps a bridge small and quick to start: one per editor window."""
    code = ("import sys, pocketmcp.cli, pocketmcp.mcp.serve, pocketmcp.mcp.bridge, "
            "pocketmcp.mcp.sharing\n"
            "heavy = [m for m in ('mcp', 'mcp_types', 'pydantic', 'numpy') if m in sys.modules]\n"
            "assert not heavy, heavy")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr


def test_a_server_an_editor_starts_gets_the_editors_settings(tmp_path: Path) -> None:
    """Its settings pass through the environment, flags included: the same Config."""
    from pocketmcp.config import child_environment, load

    config = load({"CHUNK_SIZE": "700", "TOOLS": "core", "EMBED_DOC_PREFIX": "none",
                   "EMBED_QUERY_PREFIX": "query:\\n", "LIBRARY": "notes"},
                  environ={"SQLITE_PATH": str(tmp_path / "i.db"), "WATCH_DIR": str(tmp_path),
                           "INCLUDE_GLOBS": "**/*.md,**/*.txt", "POCKETMCP_TOKEN": "t0ken-x"})
    assert load({}, environ=child_environment(config)) == config
    unwatched = load({}, environ={"SQLITE_PATH": str(tmp_path / "i.db")})
    again = load({}, environ=child_environment(unwatched))
    assert not again.watched.given and again == unwatched
    named = Path(again.main_place().database("x").describe())  # still beside the index
    assert named.parent == (tmp_path / "databases").resolve()
    elsewhere = load({}, environ={"SQLITE_PATH": str(tmp_path / "i.db"),
                                  "PG_SCHEMA": "team", "MCP_ALLOWED_HOSTS": "notes.lan"})
    assert load({}, environ=child_environment(elsewhere)) == elsewhere


@pytest.mark.usefixtures("processes")
async def test_a_request_in_flight_when_the_server_dies_is_answered_at_once(
        root: Path, fake_provider: ProviderServer) -> None:
    # The server embeds with a test provider of its own; once it hangs, a write waits on it,
    # in flight for as long as the test wants, and the server is killed while it waits.
    provider = fake_provider
    remote = provider_settings(provider.url)
    docs = [{"external_id": "kettles", "text": "A note that says something new about kettles."}]
    with anyio.fail_after(180):
        async with mcp_session(root, stderr_name="one.err", **SHARED, **remote) as session:
            await search(session)
            server = published(root)
            failed: list[BaseException] = []
            finished: list[Any] = []
            answered = anyio.Event()

            async def reindex() -> None:
                try:
                    finished.append(await session.call_tool("upsert_documents",
                                                            {"docs": docs}))
                except MCPError as exc:
                    failed.append(exc)
                answered.set()

            async def in_flight() -> int:
                return provider.in_flight

            provider.always = Fault(hang=True)
            async with anyio.create_task_group() as tg:
                tg.start_soon(reindex)
                await until(in_flight, lambda n: n > 0, 60)  # the write waits on the provider
                os.kill(server.pid, signal.SIGKILL)
                with anyio.fail_after(10):  # answered, never left hanging
                    await answered.wait()
            provider.always = None
            assert failed, finished
            assert "went away while this request was in flight" in str(failed[0])
            said = failed[0].error.message  # type: ignore[attr-defined]
            assert said.startswith("WRITE_UNCONFIRMED: ") and "whether it was applied" in said
            again = await search(session, "brews best at 80 degrees")  # on a new server
            assert again["matches"][0]["path"] == "tea.md"
            second = published(root)
            assert second.pid != server.pid
    assert await gone(second.pid, 30)


@pytest.mark.usefixtures("processes")
async def test_an_editor_serves_on_its_own_when_no_shared_server_can_start(root: Path) -> None:
    sharing.lock_file(index_of(root)).mkdir(parents=True)  # the start lock cannot be taken
    with anyio.fail_after(90):
        async with mcp_session(root, stderr_name="one.err", **SHARED) as session:
            assert (await search(session))["matches"][0]["path"] == "tea.md"
            status = await call(session, "status")
    assert status["sharing"]["serving"] == "alone" and status["role"] == "writer"
    assert discovery.find(index_of(root)) is None and starts(root) == 0
    assert '"not_sharing"' in (root / "one.err").read_text()


@pytest.mark.usefixtures("processes")
async def test_a_read_in_flight_when_the_server_dies_is_answered_by_the_next_server(
        root: Path, fake_provider: ProviderServer) -> None:
    # The server embeds with a test provider of its own; once it hangs, a search waits on it
    # for its query's vector, and the server is killed while it waits.
    provider = fake_provider
    remote = provider_settings(provider.url)
    with anyio.fail_after(180):
        async with mcp_session(root, stderr_name="one.err", **SHARED, **remote) as session:
            await search(session)
            server = published(root)
            listed = await session.list_tools()
            reads = {tool.name for tool in listed.tools
                     if tool.annotations is not None and tool.annotations.read_only_hint}
            assert reads == READ_TOOLS  # the calls the bridge sends again
            answered: list[dict[str, Any]] = []

            async def in_flight() -> int:
                return provider.in_flight

            provider.always = Fault(hang=True)
            async with anyio.create_task_group() as tg:
                async def read() -> None:
                    answered.append(await search(session, "how hot for green tea"))

                tg.start_soon(read)
                await until(in_flight, lambda n: n > 0, 60)  # the search waits on the provider
                os.kill(server.pid, signal.SIGKILL)
                provider.always = None
            assert answered[0]["matches"][0]["path"] == "tea.md"  # by the next server
            second = published(root)
            assert second.pid != server.pid
    text = (root / "one.err").read_text()
    assert "read(s) in flight go to the next server" in text, text[-3000:]
    assert await gone(second.pid, 30)
