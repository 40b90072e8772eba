"""Servers judged by their answers, not by their process ids, with real processes: a shared
server that stops answering (SIGSTOP) is reported to its editors within seconds and
replaced, a server is never left serving where no client finds it, and a server that exits
at start because another already serves leaves the editor with that one."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.shared.exceptions import MCPError
from support.mcp_harness import (
    call,
    index_of,
    mcp_session,
    server_env,
    start_http,
    stop_http,
    until,
)

from pocketmcp.core.secret import Secret
from pocketmcp.mcp import discovery, sharing
from pocketmcp.mcp.upstream import locate

pytestmark = pytest.mark.usefixtures("processes")


async def named(root: Path) -> int | None:
    found = discovery.published(index_of(root))
    return found.pid if found is not None and discovery.alive(found.pid) else None


async def test_a_stopped_server_is_reported_within_seconds_replaced_and_published_again(
        root: Path) -> None:
    first = start_http(root)
    try:
        with anyio.fail_after(180):
            async with mcp_session(root, stderr_name="editor.err", SHARE="on",
                                   SERVER_IDLE_EXIT_S="2") as session:
                assert (await call(session, "search", {"query": "green tea"}))["matches"]
                os.kill(first.process.pid, signal.SIGSTOP)
                began = time.monotonic()
                with anyio.fail_after(20), pytest.raises(MCPError) as stuck:
                    await session.call_tool("search", {"query": "green tea"})
                waited = time.monotonic() - began
                assert stuck.value.error.code == -32000
                assert stuck.value.error.message.startswith("SERVER_NOT_ANSWERING: ")
                assert f"pid {first.process.pid}" in stuck.value.error.message
                # The next request finds another server (started for it) and is answered.
                again = await call(session, "search", {"query": "green tea"})
                assert again["matches"][0]["path"] == "tea.md"
                second = await named(root)
                assert second is not None and second != first.process.pid
                os.kill(first.process.pid, signal.SIGCONT)
                await anyio.sleep(2.5)  # the first looks at the file twice meanwhile
                assert await named(root) == second  # the one that answers stays published
            # The second goes once idle; the first, still serving, is published again.
            assert await until(lambda: named(root), lambda pid: pid == first.process.pid, 60)
        text = (root / "editor.err").read_text()
        assert '"server_not_answering"' in text, text[-3000:]
        assert waited < 15, waited
        assert '"published_again"' in first.stderr()
    finally:
        os.kill(first.process.pid, signal.SIGCONT)
        assert stop_http(first) == 0, first.stderr()[-3000:]


async def test_a_server_started_beside_one_that_already_serves_leaves_that_one_used(
        root: Path) -> None:
    """The start lock held by an editor that died: the next one starts a server while the
    first one's server publishes itself; the new one exits (one already serves), and the
    editor is given the one that serves, not left to serve on its own."""
    served = start_http(root)
    place = index_of(root)
    looks: list[Any] = []

    async def find() -> tuple[discovery.Published, Secret] | None:
        looks.append(1)
        if len(looks) <= 2:
            return None  # not yet published when the editor looked, before and under the lock
        found = await locate(place, None)
        return None if found is None or found.token is None else (found.server, found.token)

    def start() -> Any:
        env = server_env(root, MCP_TRANSPORT="http", MCP_HOST="127.0.0.1", MCP_PORT="0",
                         POCKETMCP_STARTED_BY="editor")
        return sharing.spawn(place, [sys.executable, "-m", "pocketmcp", "serve"], env, root)

    try:
        with anyio.fail_after(90):
            server, token = await sharing.ensure(place, find, start)
        assert server.pid == served.process.pid and token.reveal() == served.token
        assert "already serves" in sharing.log_file(place).read_text()  # the one started
    finally:
        assert stop_http(served) == 0, served.stderr()[-3000:]


async def test_a_server_publishes_itself_again_when_the_file_is_gone_or_names_a_dead_one(
        root: Path) -> None:
    served = start_http(root)
    place = index_of(root)
    try:
        with anyio.fail_after(60):
            discovery.server_file(place).unlink()
            assert await until(lambda: named(root), lambda pid: pid == served.process.pid, 20)
            gone = discovery.Published(url="http://127.0.0.1:9", pid=2**22 + 7,
                                       index="elsewhere", token_file=None, version="0")
            discovery.publish(place, gone)
            assert await until(lambda: named(root), lambda pid: pid == served.process.pid, 20)
    finally:
        assert stop_http(served) == 0, served.stderr()[-3000:]
    assert discovery.published(place) is None  # withdrawn at its stop


async def test_a_first_editor_whose_server_cannot_start_says_why_and_tries_again(
        root: Path) -> None:
    """The handshake is answered while the server starts; when that start fails, the request
    that waited for it says why, and the next one starts a server."""
    log = sharing.log_file(index_of(root))
    log.mkdir(parents=True)  # the server's log cannot be opened: it cannot start
    with anyio.fail_after(120):
        async with mcp_session(root, stderr_name="editor.err", SHARE="on",
                               SERVER_IDLE_EXIT_S="1") as session:
            assert {t.name for t in (await session.list_tools()).tools} >= {"search"}
            with pytest.raises(MCPError, match="no shared server of this index could be "
                                               "started") as refused:
                await session.call_tool("search", {"query": "green tea"})
            assert refused.value.error.message.startswith("SERVER_UNAVAILABLE: ")
            log.rmdir()
            found = await call(session, "search", {"query": "green tea"})
            assert found["matches"][0]["path"] == "tea.md"
            assert await named(root) is not None
    text = (root / "editor.err").read_text()
    assert text.index('"server_starting"') < text.index('"no_server"') < text.index(
        '"bridging"'), text[-3000:]
