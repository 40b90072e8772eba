"""`pocketmcp search QUERY`: one search of the index from the command line."""

from __future__ import annotations

import argparse
import json
import sys

import anyio

from pocketmcp import logs
from pocketmcp.config import Config
from pocketmcp.errors import PocketError
from pocketmcp.ops.results import SearchFilter
from pocketmcp.ops.search import Scope, search
from pocketmcp.plans import READING
from pocketmcp.runtime import open_runtime
from pocketmcp.store import places
from pocketmcp.store.pg.place import PgPlace


def scope_of(args: argparse.Namespace) -> Scope | None:
    """The filters given as flags, as the search tool's `filter` would give them."""
    flt = SearchFilter.model_validate({
        "tags": args.tag or None, "tags_all": args.all_tags or None,
        "path_glob": args.path, "modified_after": args.modified_after,
        "modified_before": args.modified_before, "created_after": args.created_after,
        "created_before": args.created_before,
        "metadata": json.loads(args.metadata) if args.metadata else None})
    return Scope.of(flt, args.library)


async def run(config: Config, args: argparse.Namespace) -> int:
    if not 1 <= args.top_k <= 100:
        raise PocketError(f"-k {args.top_k} is not valid: -k accepts 1 to 100")
    where = places.main_index(config)
    if isinstance(where, PgPlace):  # made when its writer has recorded the model
        if await anyio.to_thread.run_sync(places.recorded_identity, where) is None:
            raise PocketError(f"no index in {where.describe()}; run `pocketmcp index` first")
    elif not where.exists():
        raise PocketError(f"no index at {where}; run `pocketmcp index` first")
    try:
        scope = scope_of(args)
    except ValueError as exc:  # pydantic's, and --metadata that is not JSON
        raise PocketError(f"a filter flag is not valid: {exc}") from None
    if config.log_level == "info":
        logs.configure("warning")  # the hits are the output; start-up chatter is not
    async with open_runtime(config, READING) as runtime:
        await runtime.started()
        result = await search(await runtime.reading(), args.query, top_k=args.top_k,
                              mode=args.mode, unique_docs=args.unique_docs, scope=scope,
                              max_per_doc=args.max_per_doc)
    if result.notice:
        print(f"pocketmcp: {result.notice}", file=sys.stderr)  # noqa: T201
    if args.json:
        # The fields of the MCP tool's matches (ops/results.py), each with its rank.
        hits = [{"rank": i + 1, **m.model_dump()} for i, m in enumerate(result.matches)]
        print(json.dumps({"query": args.query, "mode": args.mode, "hits": hits,  # noqa: T201
                          "notice": result.notice}, ensure_ascii=False))
        return 0
    for i, m in enumerate(result.matches, 1):
        mark = "  (file changed since indexed)" if m.stale else ""
        print(f"{i:>2}. {m.score:.3f}  {m.path or m.title}{mark}\n    {m.preview}")  # noqa: T201
    if not result.matches:
        print("no matches")  # noqa: T201
    return 0
