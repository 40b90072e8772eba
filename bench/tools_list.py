"""How much of a client's context the tool list takes: tools/list for TOOLS=all and core.

Every tool a server offers is sent to the client's model on every turn. This lists the tools
as a client does (the SDK's in-memory client of the real server) and prints, for each TOOLS
value, the characters of the answer as JSON (json.dumps' default spacing): `model`, what a
client's model reads of it (names, titles, descriptions, input schemas, annotations: all but
the output schemas), and `whole`, the answer with its output schemas; with their limits
(pocketmcp/mcp/reference.py's LIMITS, checked by tests/mcp/test_tool_sizes.py). When
`bpe-openai` is installed (an offline copy of OpenAI's tokenizers:
`.venv/bin/pip install bpe-openai`), their tokens in o200k_base too.

    .venv/bin/python bench/tools_list.py
    ../OLD/.venv/bin/python bench/tools_list.py --as-baseline   # an earlier checkout's package

Results: bench/results/tools_list.json (tools_list.baseline.json).

Figures on: docs/tool-definitions.md; docs/tools.md; docs/using-tools.md.
"""

from __future__ import annotations

import json
import os
from typing import Any

import anyio
from common import parser_for, write_results


def _reference() -> Any:
    """pocketmcp/mcp/reference.py: how the project itself lists and measures its tools (None
    in an earlier package, run for a baseline: then the copies below)."""
    try:
        from pocketmcp.mcp import reference
    except ImportError:
        return None
    return reference


async def tools_list(tools: str) -> list[dict[str, Any]]:
    """The tools of a server with TOOLS=`tools`, as its client lists them."""
    from pocketmcp.config import load
    from pocketmcp.mcp.server import build_server
    from pocketmcp.plans import serving
    from pocketmcp.runtime import Runtime

    config = load({}, environ={"TOOLS": tools, "SQLITE_PATH": os.devnull})
    server = build_server(Runtime(config, serving(False)))  # listing needs no model or index
    if (reference := _reference()) is not None:
        listed: list[dict[str, Any]] = await reference.listing(server)
        return listed
    from mcp import Client

    async with Client(server, mode="legacy") as client:
        found = (await client.list_tools()).tools
    return [t.model_dump(by_alias=True, mode="json", exclude_none=True) for t in found]


def model_part(tool: dict[str, Any]) -> dict[str, Any]:
    """What a client's model reads of a tool's definition: all but its output schema."""
    if (reference := _reference()) is not None:
        part: dict[str, Any] = reference.model_part(tool)
        return part
    return {k: v for k, v in tool.items() if k != "outputSchema"}


def limits(tools: str) -> dict[str, int]:
    reference = _reference()
    return {} if reference is None else dict(reference.LIMITS.get(tools, {}))


def main() -> None:
    parser = parser_for(__doc__, "tools_list")
    parser.add_argument("--sets", default="all,core")
    args = parser.parse_args()
    try:
        import bpe_openai  # optional: token counts only when it is installed
    except ImportError:
        bpe_openai = None
    rows = []
    for name in args.sets.split(","):
        listed = anyio.run(tools_list, name)
        model = json.dumps({"tools": [model_part(t) for t in listed]})
        whole = json.dumps({"tools": listed})
        row: dict[str, Any] = {"tools": name, "count": len(listed), "model": len(model),
                               "whole": len(whole), "limits": limits(name)}
        if bpe_openai is not None:
            encoding = bpe_openai.get_encoding("o200k_base")
            row["model_tokens_o200k"] = len(encoding.encode(model))
            row["whole_tokens_o200k"] = len(encoding.encode(whole))
        row["per_tool_model"] = {
            t["name"]: len(json.dumps(model_part(t))) for t in listed}
        rows.append(row)
        print(json.dumps({k: v for k, v in row.items() if k != "per_tool_model"}))
    write_results(args, {"results": rows})


if __name__ == "__main__":
    main()
