"""`pocketmcp search QUERY`: one search of the index from the command line."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from typing import Any

import anyio
import httpx2

from pocketmcp import __version__, logs
from pocketmcp.config import Config
from pocketmcp.core.secret import Secret
from pocketmcp.errors import PocketError
from pocketmcp.mcp.discovery import Published
from pocketmcp.mcp.serve import find_upstream
from pocketmcp.ops.filters import Scope
from pocketmcp.ops.results import SearchFilter, SearchResult


def filter_of(args: argparse.Namespace) -> SearchFilter:
    """The filters given as flags, as the search tool's `filter` takes them."""
    return SearchFilter.model_validate({
        "tags": args.tag or None, "tags_all": args.all_tags or None,
        "path_glob": args.path, "modified_after": args.modified_after,
        "modified_before": args.modified_before, "created_after": args.created_after,
        "created_before": args.created_before,
        "metadata": json.loads(args.metadata) if args.metadata else None})


def scope_of(args: argparse.Namespace) -> Scope | None:
    return Scope.of(filter_of(args), args.library)


async def run(config: Config, args: argparse.Namespace) -> int:
    if not 1 <= args.top_k <= 100:
        raise PocketError(f"-k {args.top_k} is not valid: -k accepts 1 to 100")
    place = config.main_place()
    if not await anyio.to_thread.run_sync(place.exists):
        raise PocketError(f"no index at {place.describe()}; run `pocketmcp index` first")
    try:
        scope = scope_of(args)
    except ValueError as exc:  # pydantic's, and --metadata that is not JSON
        raise PocketError(f"a filter flag is not valid: {exc}") from None
    if config.log_level == "info":
        logs.configure("warning")  # the hits are the output; start-up chatter is not
    result, via = None, "local"
    if not args.local and args.top_k <= MAX_TOOL_TOP_K:
        # An HTTP server of this index answers at once: no model to load, no index to open.
        upstream = await find_upstream(config)
        if upstream is not None:
            result = await ask_server(*upstream, args)
            via = upstream[0].url
    if result is None:
        # The index and the model, opened here: only when no server answered.
        from pocketmcp.ops.search import search
        from pocketmcp.plans import READING
        from pocketmcp.runtime import open_runtime

        async with open_runtime(config, READING) as runtime:
            await runtime.started()
            result = await search(await runtime.reading(), args.query, top_k=args.top_k,
                                  mode=args.mode, unique_docs=args.unique_docs, scope=scope,
                                  max_per_doc=args.max_per_doc, dates=True)
    if result.notice:
        print(f"pocketmcp: {result.notice}", file=sys.stderr)  # noqa: T201
    if args.json:
        # The fields of the MCP tool's matches (ops/results.py), each with its rank.
        hits = [{"rank": i + 1, **m.model_dump()} for i, m in enumerate(result.matches)]
        print(json.dumps({"query": args.query, "mode": args.mode, "hits": hits,  # noqa: T201
                          "notice": result.notice, "via": via}, ensure_ascii=False))
        return 0
    for i, m in enumerate(result.matches, 1):
        mark = "  (file changed since indexed)" if m.stale else ""
        print(f"{i:>2}. {m.score:.3f}  {m.path or m.title}{mark}\n    {m.preview}")  # noqa: T201
    if not result.matches:
        print("no matches")  # noqa: T201
    return 0


MAX_TOOL_TOP_K = 50  # the search tool's own limit; more is searched here
PROTOCOL_VERSION = "2025-06-18"  # asked for; the server answers with the one it speaks


async def ask_server(server: Published, token: Secret,
                     args: argparse.Namespace) -> SearchResult | None:
    """The search tool's answer from the HTTP server of this index; None when it cannot be
    reached (the search is then made here). A refusal of the query is raised."""
    arguments: dict[str, object] = {
        "query": args.query, "top_k": args.top_k, "mode": args.mode,
        "unique_docs": args.unique_docs, "max_per_doc": args.max_per_doc,
        "library": args.library, "score_threshold": 0,  # the CLI keeps every hit
        "filter": filter_of(args).model_dump(exclude_none=True) or None}
    try:
        answer = await call_tool(server.mcp_url, token, "search", arguments)
    except (httpx2.HTTPError, OSError, ValueError, KeyError) as exc:
        logs.get("pocketmcp.search").warning("server_unreachable", url=server.url,
                                             error=str(exc))
        return None
    if answer.get("isError"):
        content = answer.get("content") or [{}]
        raise PocketError(f"the server at {server.url}: "
                          f"{content[0].get('text', 'the search failed')}")
    return SearchResult.model_validate(answer["structuredContent"])


async def call_tool(url: str, token: Secret, name: str, arguments: dict[str, object]
                    ) -> dict[str, Any]:
    """One tool call over MCP Streamable HTTP, as plain JSON-RPC posts: initialize, the
    call, and the session closed. (The SDK's client costs more to import than the model
    takes to load; a search needs none of its features.)"""
    headers = {"Authorization": f"Bearer {token.reveal()}",
               "Accept": "application/json, text/event-stream"}
    async with httpx2.AsyncClient(headers=headers, trust_env=False,
                                  timeout=httpx2.Timeout(30, read=120)) as http:
        init = await http.post(url, json={
            "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": PROTOCOL_VERSION, "capabilities": {},
                "clientInfo": {"name": "pocketmcp-cli", "version": __version__}}})
        init.raise_for_status()
        version = _message(init)["result"]["protocolVersion"]
        session = {"MCP-Protocol-Version": version}
        if "mcp-session-id" in init.headers:
            session["Mcp-Session-Id"] = init.headers["mcp-session-id"]
        await http.post(url, headers=session,
                        json={"jsonrpc": "2.0", "method": "notifications/initialized"})
        reply = await http.post(url, headers=session, json={
            "jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": name, "arguments": arguments}})
        reply.raise_for_status()
        if "Mcp-Session-Id" in session:
            with contextlib.suppress(httpx2.HTTPError):
                await http.delete(url, headers=session)
    result: dict[str, Any] = _message(reply)["result"]
    return result


def _message(response: httpx2.Response) -> dict[str, Any]:
    """The JSON-RPC message of a response: its JSON body, or the last `data:` event of an
    event stream."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        data = [line[5:].strip() for line in response.text.splitlines()
                if line.startswith("data:")]
        message: dict[str, Any] = json.loads(data[-1])
    else:
        message = response.json()
    if "error" in message:
        raise ValueError(f"JSON-RPC error: {message['error']}")
    return message
