"""The stdin reader and the screen of protocol lines, without a server."""

from __future__ import annotations

import os

import anyio
import pytest

from pocketmcp.mcp import lines as wire
from pocketmcp.mcp import stdio


async def test_a_line_over_the_size_limit_is_dropped_as_it_arrives_and_answered(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wire, "MAX_LINE_BYTES", 1000)
    read_fd, write_fd = os.pipe()
    lines = wire.stdin_lines(read_fd)
    try:
        os.write(write_fd, b'{"a": 1}\n' + b"x" * 5000 + b"\n")
        os.write(write_fd, b"y" * 600)
        os.write(write_fd, b"z" * 600 + b'\n{"b": 2}\n' + b"w" * 999 + b"\n")
        os.close(write_fd)
        with anyio.fail_after(10):
            async with lines:
                got = [line async for line in lines]
    finally:
        os.close(read_fd)
    assert got == ['{"a": 1}\n', wire.OVERSIZE + "\n", wire.OVERSIZE + "\n", '{"b": 2}\n',
                   "w" * 999 + "\n"]
    error = stdio.screen(wire.OVERSIZE)
    assert error is not None and error.id is None and error.error.code == -32700
    assert "1000 bytes" in error.error.message


def test_valid_messages_pass_the_screen_and_ids_survive_repair() -> None:
    for line in ('{"jsonrpc": "2.0", "id": 1, "method": "ping"}',
                 '{"jsonrpc": "2.0", "method": "notifications/initialized"}',
                 '{"jsonrpc": "2.0", "id": "x", "result": {}}'):
        assert stdio.screen(line) is None, line
    repaired = wire.repair('{"jsonrpc": "2.0", "id": "a\\u001fb", "method": "x", '
                           '"params": {"q": "\\ud800"}}')
    assert '"id": "a\\u001fb"' in repaired and "\\ud800" not in repaired
