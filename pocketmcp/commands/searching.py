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
from pocketmcp.commands.choosing import no_index
from pocketmcp.config import Config
from pocketmcp.core.secret import Secret
from pocketmcp.errors import PocketError
from pocketmcp.mcp.discovery import Published
from pocketmcp.mcp.upstream import Upstream, locate
from pocketmcp.search import floor
from pocketmcp.search.filters import Scope
from pocketmcp.search.results import SearchFilter, SearchMatch, SearchResult


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
    if args.min_score is not None and not 0 <= args.min_score <= 1:
        raise PocketError(f"--min-score {args.min_score} is not valid: it accepts 0 to 1")
    place = config.main_place()
    if not await anyio.to_thread.run_sync(place.exists):
        raise no_index(config, args.indexes_seen)
    try:
        scope = scope_of(args)
    except ValueError as exc:  # pydantic's, and --metadata that is not JSON
        raise PocketError(f"a filter flag is not valid: {exc}") from None
    if config.log_level == "info":
        logs.configure("warning")  # the hits are the output; start-up chatter is not
    threshold = args.min_score
    if threshold is None:
        from pocketmcp.search.run import SCORE_THRESHOLD  # the search tool's default

        threshold = SCORE_THRESHOLD
    search = Searcher(config, args, scope)
    try:
        # Not strict: when no match reaches the threshold, the best few come back anyway,
        # under it (search/floor.py). None is shown; the best of them says why.
        result = await search(threshold)
    finally:
        await search.aclose()
    matches, notice = result.matches, result.notice
    # Matches of a time the query named are kept whatever their score (search/dated.py).
    if matches and all(m.score < threshold and m.matched_date is None for m in matches):
        matches, notice = [], floor.others(notice)  # the floor's part: said below instead
    best = result.matches[0] if result.matches else None
    why = None if matches else nothing_passed(threshold, best,
                                              explicit=args.min_score is not None)
    if notice:
        print(f"pocketmcp: {notice}", file=sys.stderr)  # noqa: T201
    if args.json:
        # The fields of the MCP tool's matches (ops/results.py), each with its rank.
        hits = [{"rank": i + 1, **m.model_dump()} for i, m in enumerate(matches)]
        print(json.dumps({"query": args.query, "mode": args.mode, "hits": hits,  # noqa: T201
                          "notice": floor.joined(notice, why), "via": search.via,
                          "min_score": threshold}, ensure_ascii=False))
        return 0
    for i, m in enumerate(matches, 1):
        mark = "  (file changed since indexed)" if m.stale else ""
        dated = f"  (created {m.matched_date[:10]})" if m.matched_date else ""
        print(f"{i:>2}. score {m.score:.3f}  {where(m)}{dated}{mark}\n"  # noqa: T201
              f"    {m.preview}")
    if why is not None:
        print(why)  # noqa: T201
    return 0


def where(match: SearchMatch) -> str:
    """A match's place as one cites it: path:first-last line, and its PDF pages."""
    name = match.path or match.title
    if match.start_line is None:
        return name
    lines = (f"{match.start_line}" if match.end_line in (None, match.start_line)
             else f"{match.start_line}-{match.end_line}")
    pages = "" if match.page is None else (
        f" (p. {match.page})" if match.end_page in (None, match.page)
        else f" (pp. {match.page}-{match.end_page})")
    return f"{name}:{lines}{pages}"


def nothing_passed(threshold: float, top: SearchMatch | None, *, explicit: bool) -> str:
    """Why a search printed no hit (`top`: the best match, under the threshold)."""
    if top is None:
        return "no matches: nothing in the index matches this query (or these filters)"
    whose = "" if explicit else " (the search tool's default threshold)"
    return (f"no matches scoring {threshold:.2f} or more{whose}; the best scored "
            f"{top.score:.3f}: {top.path or top.title}. `--min-score 0` shows every hit.")


class Searcher:
    """Searches of one command: asked of the HTTP server of this index when one runs and
    takes this process's token (no model to load), else made here."""

    def __init__(self, config: Config, args: argparse.Namespace, scope: Scope | None) -> None:
        self.config = config
        self.args = args
        self.scope = scope
        self.via = "local"
        self._upstream: Upstream | None = None
        self._asked = False
        self._opened = contextlib.AsyncExitStack()  # the runtime, once opened here
        self._reading: Any = None

    async def __call__(self, threshold: float) -> SearchResult:
        args = self.args
        if not self._asked and not args.local and args.top_k <= MAX_TOOL_TOP_K:
            self._asked = True
            self._upstream = await locate(self.config.main_place(), self.config.serve.token)
            if self._upstream is not None and self._upstream.token is None:
                print(f"pocketmcp: {self._upstream.said()}. Searching here instead "  # noqa: T201
                      "(the model loads in this process).", file=sys.stderr)
        up = self._upstream
        if up is not None and up.token is not None:
            result = await ask_server(up.server, up.token, args, threshold)
            if result is not None:
                self.via = up.server.url
                return result
            self._upstream = None
        if self._reading is None:
            # The index and the model, opened here: only when no server answered.
            from pocketmcp.plans import READING
            from pocketmcp.runtime import open_runtime

            runtime = await self._opened.enter_async_context(
                open_runtime(self.config, READING))
            await runtime.started()
            self._reading = await runtime.reading()
        from pocketmcp.search.run import search

        self.via = "local"
        return await search(self._reading, args.query, top_k=args.top_k, mode=args.mode,
                            unique_docs=args.unique_docs, scope=self.scope,
                            max_per_doc=args.max_per_doc, score_threshold=threshold,
                            dates=True)

    async def aclose(self) -> None:
        await self._opened.aclose()


MAX_TOOL_TOP_K = 50  # the search tool's own limit; more is searched here
PROTOCOL_VERSION = "2025-06-18"  # asked for; the server answers with the one it speaks


async def ask_server(server: Published, token: Secret, args: argparse.Namespace,
                     threshold: float) -> SearchResult | None:
    """The search tool's answer from the HTTP server of this index; None when it cannot be
    reached (the search is then made here). A refusal of the query is raised."""
    arguments: dict[str, object] = {
        "query": args.query, "top_k": args.top_k, "mode": args.mode,
        "unique_docs": args.unique_docs, "max_per_doc": args.max_per_doc,
        "library": args.library, "score_threshold": threshold, "strict_threshold": False,
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
