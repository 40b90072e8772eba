"""`pocketmcp search QUERY`: one search of the index from the command line."""

from __future__ import annotations

import argparse
import json

from pocketmcp import logs
from pocketmcp.config import Config
from pocketmcp.errors import PocketError
from pocketmcp.ops.search import search
from pocketmcp.runtime import READING, open_runtime


async def run(config: Config, args: argparse.Namespace) -> int:
    if not 1 <= args.top_k <= 100:
        raise PocketError(f"-k {args.top_k} is not valid: -k accepts 1 to 100")
    if not config.sqlite_path.exists():
        raise PocketError(f"no index at {config.sqlite_path}; run `pocketmcp index` first")
    if config.log_level == "info":
        logs.configure("warning")  # the hits are the output; start-up chatter is not
    async with open_runtime(config, READING) as runtime:
        await runtime.started()
        result = await search(await runtime.reading(), args.query, top_k=args.top_k,
                              mode=args.mode, unique_docs=args.unique_docs)
    rows = [{"rank": i + 1, "score": m.score, "vector_score": m.vector_score,
             "keyword_score": m.keyword_score, "path": m.path or m.title, "title": m.title,
             "chunk_id": m.chunk_id, "resource": m.resource, "preview": m.preview}
            for i, m in enumerate(result.matches)]
    if args.json:
        print(json.dumps({"query": args.query, "mode": args.mode, "hits": rows},  # noqa: T201
                         ensure_ascii=False))
    else:
        for r in rows:
            print(f"{r['rank']:>2}. {r['score']:.3f}  {r['path']}\n    {r['preview']}")  # noqa: T201
        if not rows:
            print("no matches")  # noqa: T201
    return 0
