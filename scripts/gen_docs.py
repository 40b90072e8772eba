"""Regenerates .env.example and the settings table of docs/settings.md from the settings'
declarations (pocketmcp.config.declarations), and docs/tools.md and the bridge's manifest
(pocketmcp/mcp/manifest.json) from the tools' definitions as a client lists them (tests/docs
and tests/mcp check that all four are current)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import anyio

from pocketmcp.config import declarations
from pocketmcp.settings import env_example, settings_table

ROOT = Path(__file__).resolve().parents[1]
SETTINGS_PAGE = ROOT / "docs" / "settings.md"
MANIFEST = ROOT / "pocketmcp" / "mcp" / "manifest.json"
START, END = "<!-- settings:start -->", "<!-- settings:end -->"


def page_with_settings(text: str) -> str:
    """The page with the table between its markers made again from the declarations."""
    pattern = re.compile(re.escape(START) + ".*?" + re.escape(END), re.DOTALL)
    table = settings_table(declarations())
    return pattern.sub(lambda _: f"{START}\n{table}\n{END}", text)


def env_text() -> str:
    """The text of .env.example."""
    return env_example(declarations())


async def tools_reference() -> str:
    """docs/tools.md: the tools of TOOLS=all and core, listed by a client of each server."""
    from pocketmcp.config import load
    from pocketmcp.mcp import reference
    from pocketmcp.mcp.server import build_server
    from pocketmcp.plans import serving
    from pocketmcp.runtime import Runtime

    listings: dict[str, reference.Listed] = {}
    sdk: reference.Listed = []
    for tools in ("all", "core"):
        config = load({}, environ={"TOOLS": tools, "SQLITE_PATH": os.devnull})
        server = build_server(Runtime(config, serving(False)))  # listing needs no index
        listings[tools] = await reference.listing(server)
        if tools == "all":
            sdk = reference.wire(await server.sdk_tools())
            MANIFEST.write_text(json.dumps(await reference.manifest(server), indent=1) + "\n")
    return reference.tools_page(listings, sdk)


def main() -> None:
    (ROOT / "docs" / "tools.md").write_text(anyio.run(tools_reference))  # and the manifest
    (ROOT / ".env.example").write_text(env_text())
    SETTINGS_PAGE.write_text(page_with_settings(SETTINGS_PAGE.read_text()))


if __name__ == "__main__":
    main()
