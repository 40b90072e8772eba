"""Every refusal comes with its code, in the project's error shape: a tool's arguments outside
its schema (the field and its limit, no pydantic text or link), a body over the size limit
whatever its content type (chunked or declared), and a weak token beyond loopback."""

from __future__ import annotations

from typing import Any

import pytest
from support.tools import ToolFailed, Tools

from pocketmcp.errors import WeakToken
from pocketmcp.mcp.http import check_token

SCHEMA = "INVALID_REQUEST: the arguments of search do not fit its schema: "


@pytest.mark.parametrize(("arguments", "said"), [
    ({"query": "x" * 4001}, "query: at most 4000 characters"),
    ({"query": "otters", "top_k": 0}, "top_k: at least 1"),
    ({"query": "otters", "top_k": 10**9}, "top_k: at most 50"),
    ({"query": "otters", "score_threshold": float("nan")},
     "score_threshold: a finite number from 0 to 1"),
    ({}, "query: required"),
    # A misspelt argument or filter field is refused, not dropped (the search would run
    # unfiltered, the caller none the wiser).
    ({"query": "otters", "topk": 3}, "topk: not an argument of search"),
    ({"query": "otters", "filter": {"tag": ["birds"]}}, "filter.tag: no such field"),
])
async def test_schema_violations_name_the_field_and_its_limit(
        fake_tools: Tools, arguments: dict[str, Any], said: str) -> None:
    with pytest.raises(ToolFailed) as caught:
        await fake_tools("search", **arguments)
    text = caught.value.text.removeprefix("Error executing tool search: ")
    assert caught.value.code == "INVALID_REQUEST", text
    assert text.startswith(SCHEMA + said), text
    assert "pydantic" not in text and "http" not in text and "x" * 100 not in text, text


@pytest.mark.parametrize("token", ["a" * 16, "ab" * 12, "0123" * 8])
def test_a_weak_token_is_refused_beyond_loopback_with_its_code(token: str) -> None:
    with pytest.raises(WeakToken) as caught:
        check_token(token, "0.0.0.0")
    assert caught.value.code == "WEAK_TOKEN"
    assert token not in str(caught.value) and "8 of them different" in str(caught.value)
    check_token(token, "127.0.0.1")  # loopback: the machine's own users alone


def test_a_random_token_is_taken_beyond_loopback() -> None:
    check_token("3f9a1c07be52d8e4", "0.0.0.0")
    check_token("9b8a6e2c1f0d4a7b3e5c9d1f2a8b7c6e", "::")
