"""The wire itself: stdout carries JSON-RPC only, bad input cannot break it, exits are prompt."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.abc import Process
from support.mcp_harness import STOP_BOUND_S, call, mcp_session, server_env, until

pytestmark = pytest.mark.usefixtures("processes")


class Wire:
    """A hand-driven JSON-RPC peer on the server's stdin/stdout."""

    def __init__(self, process: Process) -> None:
        self.process = process
        self.lines: list[str] = []
        self._buffer = b""
        self._next_id = 0

    async def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send((json.dumps(message) + "\n").encode())

    async def send_raw(self, line: bytes) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send(line + b"\n")

    async def reply(self) -> dict[str, Any]:
        """The next message on stdout."""
        with anyio.fail_after(30):
            return await self._read()

    async def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self._next_id += 1
        ident = self._next_id
        await self.send({"jsonrpc": "2.0", "id": ident, "method": method,
                         "params": params or {}})
        with anyio.fail_after(30):
            while True:
                message = await self._read()
                if message.get("id") == ident:
                    return message

    async def _read(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        while b"\n" not in self._buffer:
            self._buffer += await self.process.stdout.receive()
        line, self._buffer = self._buffer.split(b"\n", 1)
        text = line.decode("utf-8")  # must be valid UTF-8
        self.lines.append(text)
        message = json.loads(text)  # every line is one JSON-RPC message
        assert message.get("jsonrpc") == "2.0"
        return message

    async def drain(self) -> None:
        assert self.process.stdout is not None
        try:
            while True:
                self._buffer += await self.process.stdout.receive()
        except anyio.EndOfStream:
            pass
        for line in self._buffer.decode("utf-8").splitlines():
            if line.strip():
                self.lines.append(line)
                assert json.loads(line).get("jsonrpc") == "2.0"


@asynccontextmanager
async def _server(tmp_path: Path, **env: str) -> AsyncIterator[Process]:
    (tmp_path / "kb").mkdir(exist_ok=True)
    with open(tmp_path / "server.err", "wb") as errlog:
        process = await anyio.open_process(
            [sys.executable, "-m", "pocketmcp"], env=server_env(tmp_path, **env),
            cwd=tmp_path, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errlog)
        async with process:
            yield process


async def _handshake(wire: Wire) -> None:
    init = await wire.request("initialize", {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "wire-test", "version": "1"}})
    assert init["result"]["serverInfo"]["name"] == "pocketmcp"
    await wire.send({"jsonrpc": "2.0", "method": "notifications/initialized"})


async def test_stdout_carries_only_json_rpc_whatever_the_input(tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "weird.md").write_bytes(b"# Bad bytes\n\ncaf\xe9 \x1b[31mred\x1b[0m \x07bell text\n")
    (kb / "blob.md").write_bytes(bytes(range(256)) * 8)
    os.makedirs(kb / "dir", exist_ok=True)
    (kb / os.fsdecode(b"caf\xe9-latin1-name.md")).write_text("A file whose name is Latin-1.")
    async with _server(tmp_path) as process:
        wire = Wire(process)
        await _handshake(wire)
        tools = await wire.request("tools/list")
        assert len(tools["result"]["tools"]) >= 7
        # A lone surrogate and control characters arrive from the client...
        upsert = await wire.request("tools/call", {"name": "upsert_documents", "arguments": {
            "docs": [{"text": "lone \ud800 surrogate and \x01 control about zebras",
                      "title": "odd \udfff title", "external_id": "odd"}]}})
        assert upsert["result"].get("isError") is not True, upsert
        # ...and leave again as clean text, as do file contents and names.
        for query in ("zebras", "bad bytes red bell", "latin"):
            found = await wire.request("tools/call", {"name": "search", "arguments": {
                "query": query, "top_k": 10}})
            assert found["result"].get("isError") is not True, found
        # Malformed requests: wrong types, unknown tool, arguments that are not an object.
        for arguments in ({"query": 7}, {"top_k": "many"}):
            bad = await wire.request("tools/call", {"name": "search", "arguments": arguments})
            assert bad["result"]["isError"] is True
        unknown = await wire.request("tools/call", {"name": "nope", "arguments": {}})
        assert unknown["result"]["isError"] is True
        not_object = await wire.request("tools/call", {"name": "search", "arguments": "x"})
        assert "error" in not_object
        await wire.send({"jsonrpc": "2.0", "id": 99, "method": "tools/call"})  # no params
        bad_uri = await wire.request("resources/read", {"uri": "mcp+doc://abc#def"})
        assert "error" in bad_uri
        status = await wire.request("tools/call", {"name": "status", "arguments": {}})
        assert status["result"]["structuredContent"]["documents"] >= 2
        assert process.stdin is not None
        await process.stdin.aclose()
        with anyio.fail_after(10):
            await wire.drain()
            assert await process.wait() == 0
    text = "\n".join(wire.lines)
    assert "\\ud800" not in text and "\\udfff" not in text and "\\u0001" not in text
    assert "\\u001b" not in text and "\\u0007" not in text
    log = (tmp_path / "server.err").read_text(errors="replace")
    assert "not valid UTF-8" in log  # the Latin-1 file name was skipped, and said so


# Lines that are not valid JSON-RPC, and the error each deserves: (code, id of the reply).
_BAD_LINES: list[tuple[bytes, int, Any]] = [
    (b"{not json", -32700, None),
    (b"\xff\xfe\x00garbage \x80\x81", -32700, None),
    (b'{"jsonrpc": "1.0", "id": 7, "method": "tools/list"}', -32600, 7),
    (b'{"jsonrpc": "2.0", "id": {"an": "object"}, "method": "tools/list"}', -32600, None),
    (b'{"jsonrpc": "2.0", "id": 8, "method": 5}', -32600, 8),
    (b'[{"jsonrpc": "2.0", "id": 9, "method": "tools/list"}]', -32600, None),
    (b"[]", -32600, None),
    (b"42", -32600, None),
    (b'"just a string"', -32600, None),
    (b"[" * 5000 + b"]" * 5000, -32700, None),
    (b"[" * 100_000 + b"]" * 100_000, -32700, None),
    (b'{"jsonrpc": "2.0", "id": 10, "method": "x", "params": ' + b'{"a": ' * 5000 + b"1"
     + b"}" * 5000 + b"}", -32700, None),
    (b'{"jsonrpc": "2.0", "id": 11, "method": "x", "params": "\\ud800' + b"[" * 3000 + b'"}',
     -32600, 11),
]


async def test_every_line_that_is_not_json_rpc_gets_its_error_and_the_server_goes_on(
        tmp_path: Path) -> None:
    async with _server(tmp_path) as process:
        wire = Wire(process)
        await _handshake(wire)
        for line, code, ident in _BAD_LINES:
            await wire.send_raw(line)
            reply = await wire.reply()
            assert reply["error"]["code"] == code, (line[:80], reply)
            assert reply["id"] == ident, (line[:80], reply)
        # Blank lines are no messages: nothing answers them, and nothing breaks.
        await wire.send_raw(b"")
        status = await wire.request("tools/call", {"name": "status", "arguments": {}})
        assert status["result"].get("isError") is not True
        assert len(wire.lines) == 1 + len(_BAD_LINES) + 1


async def _exit_time(tmp_path: Path, how: str) -> float:
    async with _server(tmp_path) as process:
        wire = Wire(process)
        await _handshake(wire)
        await wire.request("tools/call", {"name": "status", "arguments": {}})
        started = time.perf_counter()
        if how == "eof":
            assert process.stdin is not None
            await process.stdin.aclose()
        else:
            process.send_signal(signal.SIGTERM)
        with anyio.fail_after(2 * STOP_BOUND_S):
            code = await process.wait()
        elapsed = time.perf_counter() - started
    assert code == 0
    assert '"event": "stopped"' in (tmp_path / "server.err").read_text()
    return elapsed


async def test_stdin_eof_stops_the_server_promptly(tmp_path: Path) -> None:
    assert await _exit_time(tmp_path, "eof") < STOP_BOUND_S


async def test_sigterm_stops_the_server_promptly(tmp_path: Path) -> None:
    assert await _exit_time(tmp_path, "sigterm") < STOP_BOUND_S


async def test_a_stop_does_not_wait_for_pathological_files_in_progress(tmp_path: Path) -> None:
    """A 300 KB one-line file is cut at the most chunks one document makes and its chunks are
    being embedded when SIGTERM comes; a million-column CSV is converting or chunking."""
    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "line.txt").write_text(" ".join(f"w{i % 977}x{i % 13}" for i in range(40_000)))
    (kb / "wide.csv").write_text(",".join(str(i % 10) for i in range(1_000_000)) + "\n")
    log = tmp_path / "server.err"
    async with _server(tmp_path) as process:
        wire = Wire(process)
        await _handshake(wire)
        await until(lambda: anyio.to_thread.run_sync(log.read_text),
                    lambda text: '"event": "cut"' in text, seconds=60)
        started = time.perf_counter()
        process.send_signal(signal.SIGTERM)
        with anyio.fail_after(2 * STOP_BOUND_S):
            code = await process.wait()
        elapsed = time.perf_counter() - started
    assert code == 0 and elapsed < STOP_BOUND_S, elapsed
    assert '"event": "stopped"' in log.read_text()


async def test_two_servers_share_one_index_and_the_reader_takes_over(tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "a.md").write_text("# Otters\n\nSea otters hold hands while they sleep.\n")
    async with mcp_session(tmp_path, stderr_name="one.err") as one:
        await until(lambda: call(one, "status"), lambda s: s["initial_indexing_done"])
        async with mcp_session(tmp_path, stderr_name="two.err") as two:
            # Its role is "pending" until it has tried the writer lock.
            status = await until(lambda: call(two, "status"),
                                 lambda s: s["model_ready"] and s["role"] != "pending")
            assert status["role"] == "reader"
            (kb / "b.md").write_text("# Owls\n\nOwls turn their heads very far around.\n")
            # The reader sees the writer's commits.
            found = await until(lambda: call(two, "search", {"query": "owl heads"}),
                                lambda r: bool(r["matches"])
                                and r["matches"][0]["path"] == "b.md")
            assert found["matches"][0]["score"] > 0.3
            message = (await two.call_tool("upsert_documents", {
                "docs": [{"text": "x"}]})).content[0].text
            assert "read-only" in message
            await one.call_tool("status", {})
            # Closing the first server hands the writer lock to the second.
            one_exit = one
        del one_exit
        # `one` has exited here; the reader became the writer.
    async with mcp_session(tmp_path, stderr_name="three.err") as three, mcp_session(
        tmp_path, stderr_name="four.err"
    ) as four:
        roles = sorted([
            (await until(lambda: call(three, "status"), lambda s: s["role"] != "pending"))[
                "role"],
            (await until(lambda: call(four, "status"), lambda s: s["role"] != "pending"))[
                "role"],
        ])
        assert roles == ["reader", "writer"]
