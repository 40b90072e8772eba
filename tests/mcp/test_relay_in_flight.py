"""The requests a bridge has in flight when its server is lost: every one answered once,
reads as safe to send again, writes as not known to have been applied; a read sent again
once may be sent again once more after it was answered (its id reused)."""

from __future__ import annotations

import json

import anyio
import anyio.abc

from pocketmcp.mcp.relay import Relay


def _call(ident: int, tool: str) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": ident, "method": "tools/call",
                       "params": {"name": tool, "arguments": {}}})


async def test_requests_held_before_their_post_are_answered_when_the_server_is_lost() -> None:
    send, receive = anyio.create_memory_object_stream[str](10)
    async with send, receive:
        await _lost(Relay(send), receive)


async def _lost(relay: Relay, receive: anyio.abc.ObjectReceiveStream[str]) -> None:
    relay.hold([_call(1, "search"), _call(2, "upsert_documents"),
                json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})])
    assert sorted(relay.pending) == [1, 2]  # the notification waits for no answer
    await relay.fail_pending("it was not answered; send it again", "SERVER_NOT_ANSWERING",
                             writes="whether it was applied is not known")
    answers = {m["id"]: m["error"]["message"] for m in
               (json.loads(receive.receive_nowait()) for _ in range(2))}
    assert answers[1].startswith("SERVER_NOT_ANSWERING: ")
    assert answers[2].startswith("WRITE_UNCONFIRMED: ") and "applied" in answers[2]
    assert not relay.pending
    with anyio.move_on_after(0) as nothing:
        await receive.receive()  # each answered once: nothing more
    assert nothing.cancelled_caught


async def test_a_read_sent_again_and_answered_may_be_sent_again_later() -> None:
    send, receive = anyio.create_memory_object_stream[str](10)
    async with send, receive:
        await _again(Relay(send), receive)


async def _again(relay: Relay, receive: anyio.abc.ObjectReceiveStream[str]) -> None:
    relay.hold([_call(7, "search")])
    assert relay.take_reads() == [_call(7, "search")]  # sent once again, to the next server
    relay.hold([_call(7, "search")])
    assert relay.take_reads() == []  # not twice for the same loss
    await relay.deliver(json.dumps({"jsonrpc": "2.0", "id": 7, "result": {"content": []}}))
    assert not relay.resent  # answered: nothing kept of it
    relay.hold([_call(7, "search")])  # the client reuses the id
    assert relay.take_reads() == [_call(7, "search")]
    assert json.loads(receive.receive_nowait())["id"] == 7
