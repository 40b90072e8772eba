"""What the stdio server does for its start-up: the MCP SDK is imported while the runtime
starts, what the client sends meanwhile waits for it (nothing is lost), and the garbage
collector waits until both are up (the imports on the way make objects by the hundred
thousand and free none)."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import pytest
from support.mcp_harness import server_env
from support.runtime import fake, make_config, provider_embedding, running
from support.tools import Tools

from pocketmcp.config import Config
from pocketmcp.mcp import host


@pytest.fixture
def collector_off() -> Iterator[None]:
    """The garbage collector off and nothing frozen (the suite freezes what it collected), as
    `pocketmcp serve` starts; on and unfrozen afterwards."""
    gc.unfreeze()
    gc.disable()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.enable()


@pytest.mark.usefixtures("collector_off")
async def test_the_collector_is_back_on_with_start_up_frozen_once_session_and_runtime_are_up(
    config: Config
) -> None:
    session_up = anyio.Event()
    async with running(config, embedding=fake(config)) as rt:
        assert not gc.isenabled()  # the runtime's start does not turn it on by itself
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                tg.start_soon(host._collect_once_started, rt, session_up)
                await anyio.wait_all_tasks_blocked()
                assert not gc.isenabled()  # the runtime is ready, the session is not up
                session_up.set()
        assert gc.isenabled()
        assert gc.get_freeze_count() > 10_000  # modules, classes and models of start-up


def message(ident: int | None, method: str, **params: Any) -> bytes:
    body: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if ident is not None:
        body["id"] = ident
    if params:
        body["params"] = params
    return json.dumps(body).encode() + b"\n"


async def test_what_the_client_sends_at_spawn_is_all_answered(
        tmp_path: Path, processes: dict[str, str]) -> None:
    config = make_config(tmp_path, processes)  # the index as the server will embed
    async with running(config, embedding=provider_embedding(config)) as rt:
        await Tools(rt).add(("owls", "Owls hunt small mammals at night using silent flight."))
    burst = b"".join([
        message(1, "initialize", protocolVersion="2025-11-25", capabilities={},
                clientInfo={"name": "burst", "version": "1"}),
        message(None, "notifications/initialized"),
        message(2, "tools/call", name="search", arguments={"query": "owls at night"}),
        b"{not json\n",
        message(3, "tools/list"),
        message(4, "tools/call", name="search", arguments={"query": "owls", "top_k": 0}),
        message(5, "ping"),
    ])
    with open(tmp_path / "server.err", "wb") as errlog:
        process = await anyio.open_process(
            [sys.executable, "-m", "pocketmcp"], env=server_env(tmp_path, LOG_LEVEL="debug"),
            cwd=tmp_path, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errlog)
        async with process:
            assert process.stdin is not None and process.stdout is not None
            await process.stdin.send(burst)  # at once, long before the SDK is in
            replies = await _read_replies(process.stdout, count=6)
            await process.stdin.aclose()
            with anyio.fail_after(30):
                assert await process.wait() == 0
    by_id = {r.get("id"): r for r in replies}
    assert sorted(by_id, key=str) == [1, 2, 3, 4, 5, None]  # each once, none lost
    assert by_id[1]["result"]["serverInfo"]["name"] == "pocketmcp"
    assert by_id[None]["error"]["code"] == -32700
    assert "Owls hunt" in by_id[2]["result"]["structuredContent"]["matches"][0]["preview"]
    assert {t["name"] for t in by_id[3]["result"]["tools"]} >= {"search", "status"}
    assert by_id[4]["result"]["isError"] is True
    assert by_id[5]["result"] == {}
    log = (tmp_path / "server.err").read_text()
    assert '"session_up"' in log and '"ready"' in log


async def _read_replies(stdout: anyio.abc.ByteReceiveStream, count: int
                        ) -> list[dict[str, Any]]:
    """The next `count` messages on the server's stdout (every line must be one)."""
    buffer, replies = b"", []
    with anyio.fail_after(60):
        while len(replies) < count:
            buffer += await stdout.receive()
            *whole, buffer = buffer.split(b"\n")
            replies += [json.loads(line) for line in whole]
    assert buffer == b""
    return replies


def test_the_stdio_host_imports_neither_the_sdk_nor_the_http_server_before_the_runtime_starts(
        ) -> None:
    # host_stdio imports the SDK in a worker thread while the model loads and the index
    # opens; a module-level import of the HTTP side would make every start wait for it.
    code = ("import sys, pocketmcp.cli, pocketmcp.mcp.serve, pocketmcp.mcp.host\n"
            "heavy = [m for m in ('mcp', 'mcp_types', 'uvicorn', 'starlette', "
            "'pocketmcp.mcp.http', 'pocketmcp.mcp.server') if m in sys.modules]\n"
            "assert not heavy, heavy")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
