"""The stdio front (mcp/front.py): its answers are the SDK's, and the SDK takes the session
over without losing or repeating a message."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
from conftest import Tools, make_config, running
from mcp_harness import mcp_session

from pocketmcp.mcp import front, frontgen
from pocketmcp.mcp.server import build_server
from pocketmcp.mcp.texts import instructions_for
from pocketmcp.runtime import Runtime

DOCS = (("owls", "Owls hunt small mammals at night using silent flight."),
        ("bread", "Sourdough bread rises slowly thanks to wild yeast."))


def test_front_json_is_what_the_installed_sdk_answers() -> None:
    recorded = json.loads(front.DATA.read_text(encoding="utf-8"))
    assert recorded == anyio.run(frontgen.record), (
        "front.json is out of date: run `.venv/bin/python -m pocketmcp.mcp.frontgen`")


async def front_exchange(rt: Runtime, messages: list[dict[str, Any]], title: str,
                         instructions: str) -> list[dict[str, Any] | None]:
    """The front's replies to `messages`, one per request (None: left to the SDK)."""
    out_in, out = anyio.create_memory_object_stream[str](64)
    got: dict[Any, dict[str, Any]] = {}
    async with out_in, out, anyio.create_task_group() as tg:
        fr = front.Front(rt, title, instructions, out_in, tg, front.recorded())
        for message in messages:
            await fr.take(json.dumps(message))
        left = {json.loads(line).get("id") for line in fr.pending}
        answered = [m["id"] for m in messages if "id" in m and m["id"] not in left]
        with anyio.fail_after(30):
            while len(got) < len(answered):
                reply = json.loads(await out.receive())
                got[reply["id"]] = reply
    return [got.get(m["id"]) for m in messages if "id" in m]


def session_of(protocol: str, *requests: dict[str, Any]) -> list[dict[str, Any]]:
    messages = [frontgen.initialize(0, protocol), frontgen.INITIALIZED]
    return messages + [{"jsonrpc": "2.0", "id": i + 1, **r} for i, r in enumerate(requests)]


def search(**arguments: Any) -> dict[str, Any]:
    return {"method": "tools/call", "params": {"name": "search", "arguments": arguments}}


async def test_the_fronts_answers_equal_the_sdks_at_every_protocol_version(
        tmp_path: Path) -> None:
    async with running(make_config(tmp_path)) as rt:
        await Tools(rt).add(*DOCS)
    config = make_config(tmp_path, env={"TOOLS": "search,status,get_document"})
    async with running(config) as rt:
        server = build_server(rt, name="notes")
        for protocol in (*frontgen.HANDSHAKE_PROTOCOL_VERSIONS, "1999-01-01"):
            messages = session_of(
                protocol, {"method": "ping"}, {"method": "tools/list"},
                search(query="owls at night"),
                search(query="bread", top_k=1, mode="keyword", filter={"tags": ["x"]}),
                search(query="owls", filter={"modified_after": "not a date"}))
            sdk = await frontgen.exchange(server, messages)
            ours = await front_exchange(rt, messages, "notes", instructions_for(config.tools))
            assert ours == sdk, protocol
    assert sdk[3]["result"]["structuredContent"]["matches"]  # the first search found owls
    assert sdk[5]["result"]["isError"]  # and the date is none


async def test_the_front_leaves_to_the_sdk_what_it_does_not_answer(tmp_path: Path) -> None:
    async with running(make_config(tmp_path)) as rt:
        ours = await front_exchange(rt, session_of(
            "2025-11-25", {"method": "resources/list"}, search(query="owls", top_k=0),
            search(query="owls", top_k="[3]"),
            {"method": "tools/call", "params": {"name": "status", "arguments": {}}},
            search(query="owls")), "pocketmcp", "-")
    assert [r is None for r in ours] == [False, True, True, True, True, False]
    (tmp_path / "other").mkdir()
    async with running(make_config(tmp_path / "other")) as rt:
        ours = await front_exchange(rt, [{"jsonrpc": "2.0", "id": 1, "method": "ping"},
                                         frontgen.initialize(2, "2025-11-25")], "p", "-")
    assert ours == [None, None]  # a session opened otherwise is the SDK's alone


async def test_a_search_at_once_answers_as_one_after_the_sdk_has_taken_over(
        tmp_path: Path) -> None:
    async with running(make_config(tmp_path)) as rt:
        await Tools(rt).add(*DOCS)
    async with mcp_session(tmp_path, LOG_LEVEL="debug") as session:
        first = await session.call_tool("search", {"query": "owls at night"})
        listed = await session.list_tools()
        # Asked before the SDK is in: answered once it has taken over, in order.
        resources = await session.list_resources()
        status = await session.call_tool("status", {})
        bad = await session.call_tool("search", {"query": "owls", "top_k": 0})
        log = (tmp_path / "server.err").read_text()
        assert '"sdk_up"' in log
        again = await session.call_tool("search", {"query": "owls at night"})
        assert (await session.list_tools()) == listed
    assert not first.is_error and first.structured_content is not None
    assert first.structured_content["matches"]
    assert first.content == again.content
    assert first.structured_content == again.structured_content
    assert resources.resources is not None
    assert not status.is_error
    assert bad.is_error and "top_k" in bad.content[0].text  # type: ignore[union-attr]
    answered_by = [json.loads(line).get("logger") for line in log.splitlines()
                   if '"front_initialize"' in line]
    assert answered_by  # the session was opened by the front


async def test_a_search_cancelled_before_it_is_answered_gets_no_reply_and_the_session_goes_on(
        tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    from mcp_harness import server_env

    (tmp_path / "kb").mkdir()
    (tmp_path / "kb" / "owls.md").write_text("# Owls\n\nOwls hunt at night.\n", encoding="utf-8")
    proc = await anyio.to_thread.run_sync(lambda: subprocess.Popen(
        [sys.executable, "-m", "pocketmcp"], cwd=tmp_path, env=server_env(tmp_path),
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL))
    assert proc.stdin is not None and proc.stdout is not None
    try:
        # All at once, right after spawn: the search still waits for the model when the
        # cancellation is read, so it is the front's to cancel.
        first = [frontgen.initialize(1, "2025-11-25"), frontgen.INITIALIZED,
                 {"jsonrpc": "2.0", "id": 2, **search(query="owls")},
                 {"jsonrpc": "2.0", "method": "notifications/cancelled",
                  "params": {"requestId": 2}},
                 {"jsonrpc": "2.0", "id": 3, **search(query="owls at night")},
                 {"jsonrpc": "2.0", "id": 4, "method": "resources/list"}]
        proc.stdin.write(b"".join(json.dumps(m).encode() + b"\n" for m in first))
        proc.stdin.flush()
        replies: dict[Any, dict[str, Any]] = {}

        def read_until(ids: set[int]) -> None:
            assert proc.stdout is not None
            while not ids <= set(replies):
                line = proc.stdout.readline()
                assert line, "the server closed stdout"
                reply = json.loads(line)
                assert reply.get("id") not in replies, reply  # nothing answered twice
                replies[reply.get("id")] = reply

        with anyio.fail_after(60):
            await anyio.to_thread.run_sync(read_until, {1, 3, 4})
        assert replies[1]["result"]["serverInfo"]["name"]
        assert not replies[3]["result"]["isError"]
        assert "resources" in replies[4]["result"]
        # One more request: answered too, and the cancelled search never is.
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 5, "method": "ping"}).encode()
                         + b"\n")
        proc.stdin.flush()
        with anyio.fail_after(30):
            await anyio.to_thread.run_sync(read_until, {5})
        assert replies[5]["result"] == {}
        assert 2 not in replies
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                os.kill(proc.pid, 9)
            proc.stdout.close()
    assert proc.returncode == 0
