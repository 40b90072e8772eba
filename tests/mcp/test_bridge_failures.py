"""The bridge when one request goes wrong while its server still runs: a real bridge process
(`pocketmcp` on stdio) relaying to a small real HTTP server (upstream_stub.py) that resets one
connection, forgets a session, refuses a request or sends a message that is not JSON. The
request concerned is answered with an error, the others go on, and the bridge keeps serving.
And, with the same server, what an editor with SHARE=on and `doctor` make of one that runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import httpx2
import pytest
from support.mcp_harness import server_env

from pocketmcp.core.secret import Secret
from pocketmcp.mcp import discovery, sharing
from pocketmcp.mcp.upstream import locate
from pocketmcp.store.places import at_file

STUB = Path(__file__).with_name("upstream_stub.py")


@pytest.fixture
def stub(tmp_path: Path, processes: dict[str, str]) -> Iterator[str]:
    """The stub server, published beside the index of `tmp_path` as its HTTP server, its
    token in the token file beside the index; its URL."""
    yield from _stub(tmp_path, None)


@pytest.fixture
def guarded_stub(tmp_path: Path, processes: dict[str, str]) -> Iterator[str]:
    """The stub server, taking only the token in its own STUB_TOKEN (no token file)."""
    yield from _stub(tmp_path, "the-servers-own-token")


def _stub(tmp_path: Path, token: str | None) -> Iterator[str]:
    """The stub, taking `token` (None: the one in the token file beside the index)."""
    port_file = tmp_path / "port"
    index = tmp_path / "data" / "index.db"
    token_file = None if token is not None else discovery.ensure_token(at_file(index))[1]
    taken = token if token_file is None else discovery.read_token(token_file).reveal()
    process = subprocess.Popen([sys.executable, str(STUB), str(port_file)],
                               env={**os.environ, "STUB_TOKEN": taken})
    try:
        deadline = time.monotonic() + 20
        while not port_file.exists():
            assert process.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        url = f"http://127.0.0.1:{port_file.read_text()}"
        discovery.publish(at_file(index), discovery.Published(
            url=url, pid=process.pid, index=str(index),
            token_file=None if token_file is None else str(token_file), version="0"))
        yield url
    finally:
        process.kill()
        process.wait(timeout=10)


class Bridge:
    def __init__(self, process: anyio.abc.Process) -> None:
        self.process = process
        self.buffer = b""

    async def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send(json.dumps(message).encode() + b"\n")

    async def line(self) -> str:
        assert self.process.stdout is not None
        while b"\n" not in self.buffer:
            self.buffer += await self.process.stdout.receive()
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line.decode()

    async def answers(self, count: int) -> dict[Any, dict[str, Any]]:
        """The next `count` answers, by id."""
        found: dict[Any, dict[str, Any]] = {}
        while len(found) < count:
            message = json.loads(await self.line())
            found[message["id"]] = message
        return found

    async def request(self, request_id: int, method: str) -> dict[str, Any]:
        await self.send({"jsonrpc": "2.0", "id": request_id, "method": method})
        return (await self.answers(1))[request_id]


@asynccontextmanager
async def bridge(root: Path) -> AsyncIterator[Bridge]:
    with open(root / "bridge.err", "wb") as errlog:
        async with await anyio.open_process(
                [sys.executable, "-m", "pocketmcp"], env=server_env(root, SHARE="on"),
                cwd=root, stderr=errlog) as process:
            relay = Bridge(process)
            await relay.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "probe", "version": "0"}}})
            assert "result" in (await relay.answers(1))[1]
            await relay.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            try:
                yield relay
            finally:
                assert process.stdin is not None
                await process.stdin.aclose()
                with anyio.fail_after(10):
                    await process.wait()
    assert '"bridging"' in (root / "bridge.err").read_text()  # it did relay


async def test_a_reset_connection_fails_its_request_alone(tmp_path: Path, stub: str) -> None:
    with anyio.fail_after(30):
        async with bridge(tmp_path) as relay:
            await relay.send({"jsonrpc": "2.0", "id": 2, "method": "slow"})
            await anyio.sleep(0.2)  # in flight at the server
            await relay.send({"jsonrpc": "2.0", "id": 3, "method": "reset"})
            answers = await relay.answers(2)
            assert answers[2]["result"]["method"] == "slow"  # still answered
            assert answers[3]["error"]["code"] == -32000
            assert "send it again" in answers[3]["error"]["message"]
            assert (await relay.request(4, "echo"))["result"]["method"] == "echo"
            assert relay.process.returncode is None  # still serving, on the same session
            assert (await relay.request(5, "echo"))["result"]["session"] == "s1"


async def test_an_http_error_answers_its_request_and_a_forgotten_session_is_opened_again(
        tmp_path: Path, stub: str) -> None:
    with anyio.fail_after(30):
        async with bridge(tmp_path) as relay:
            bad = await relay.request(2, "bad")
            assert bad["error"]["code"] == -32000
            assert "HTTP 400: Bad Request: no good" in bad["error"]["message"]
            gone = await relay.request(3, "expire")
            assert "HTTP 404: Session not found" in gone["error"]["message"]
            again = await relay.request(4, "echo")  # on a new session, initialize repeated
            assert again["result"] == {"method": "echo", "session": "s2"}
            token = discovery.read_token(discovery.token_file(
                at_file(tmp_path / "data" / "index.db")))
            async with httpx2.AsyncClient(trust_env=False, headers={
                    "Authorization": f"Bearer {token.reveal()}"}) as client:
                assert (await client.get(stub + "/opened")).json() == ["s1", "s2"]


async def test_a_message_that_is_not_json_reaches_the_client_on_one_line(
        tmp_path: Path, stub: str) -> None:
    with anyio.fail_after(30):
        async with bridge(tmp_path) as relay:
            await relay.send({"jsonrpc": "2.0", "id": 2, "method": "lines"})
            assert await relay.line() == "not json second line"
            assert (await relay.request(3, "echo"))["result"]["method"] == "echo"


async def test_a_shared_editor_refused_by_the_running_server_starts_no_other(
        tmp_path: Path, guarded_stub: str) -> None:
    """SHARE=on with a server that runs but refuses this editor's token: no server is started
    beside it (one would only fail), and why is said."""
    (tmp_path / "kb").mkdir()
    env = server_env(tmp_path, SHARE="on", POCKETMCP_TOKEN="not-the-servers-token")
    with anyio.fail_after(60), open(tmp_path / "editor.err", "wb") as errlog:
        async with await anyio.open_process([sys.executable, "-m", "pocketmcp"], env=env,
                                            cwd=tmp_path, stderr=errlog) as editor:
            while '"not_sharing"' not in (tmp_path / "editor.err").read_text():
                assert editor.returncode is None
                await anyio.sleep(0.1)
            assert editor.stdin is not None
            await editor.stdin.aclose()  # the editor serves on its own meanwhile
            await editor.wait()
    said = [line for line in (tmp_path / "editor.err").read_text().splitlines()
            if '"not_sharing"' in line]
    assert "refused the POCKETMCP_TOKEN set here (HTTP 401)" in said[0]
    assert "not-the-servers-token" not in said[0]
    assert not sharing.log_file(at_file(tmp_path / "data" / "index.db")).exists()  # none started


async def test_doctor_describes_the_server_locate_found(tmp_path: Path, stub: str) -> None:
    index = at_file(tmp_path / "data" / "index.db")
    with anyio.fail_after(20):
        found = await locate(index, None)
        assert found is not None and found.token is not None
        line = await sharing.described(index, found, on=True)
        assert line.startswith(f"a shared server started by you serves this index at {stub}")
        assert line.endswith(": 2 client(s), model loaded, 123 MiB")
        refused = await locate(index, Secret("not-the-servers-token"))
        assert refused is not None and refused.token is None
        assert ("client(s)" not in await sharing.described(index, refused, on=True))
    assert (await sharing.described(index, None, on=True)).startswith("sharing on: no server")
    assert (await sharing.described(index, None, on=False)).startswith("sharing off")
