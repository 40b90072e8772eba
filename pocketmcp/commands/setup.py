"""`pocketmcp init`: write the MCP clients' configurations for a folder, its index by the
rule every command uses (indexes.py)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pocketmcp import indexes
from pocketmcp.commands.clients import (
    chosen_clients,
    command,
    entry,
    ephemeral,
    merge,
    snippet,
)
from pocketmcp.config import Config
from pocketmcp.errors import PocketError


def _folder(config: Config, args: argparse.Namespace) -> Path:
    given = args.dir or (str(config.watched.root) if config.watched.given else None)
    if given is None and sys.stdin.isatty():
        given = input("Folder of documents to search: ").strip()
    if not given:
        raise PocketError("which folder? `pocketmcp init ~/notes` (or set WATCH_DIR)")
    folder = Path(given).expanduser().absolute()
    if not folder.is_dir():
        raise PocketError(f"{folder} is not a folder")
    return folder


def init(config: Config, args: argparse.Namespace) -> int:
    folder = _folder(config, args)
    name = args.name or folder.name or "notes"
    index = Path(args.index).expanduser().absolute() if args.index else (
        indexes.index_for(folder))
    chosen = chosen_clients(args)
    for client in chosen:
        server = entry(client, folder, index, args.title)
        if args.print:
            where = ("run" if client.name == "claude-code" else f"add to {client.path}")
            print(f"# {client.title}: {where}\n{snippet(client, name, server)}\n")  # noqa: T201
            continue
        how, backup = merge(client, name, server)
        kept = f" (the previous file is kept as {backup})" if backup else ""
        said = ("the server {name!r} in {path} is unchanged" if how == "unchanged" else
                "{how} the server {name!r} in {path}")
        print(f"{client.title}: " + said.format(name=name, path=client.path, how=how)  # noqa: T201
              + kept)
    if not args.print and ephemeral(command()):
        print(f"Note: {command()[0]} is in uv's cache (uvx); the entry stops working once "  # noqa: T201
              "the cache is cleaned: `uv tool install` or `pipx install` PocketMCP and run "
              "`pocketmcp init` again for an entry that lasts.")
    if not args.print:
        made = index.is_file()
        now = (f"`pocketmcp index {folder}` made it; the server keeps it up to date"
               if made else f"`pocketmcp index {folder}` makes it now, with progress; else "
               "the server does on first start")
        if args.index:
            now = now.replace(f"index {folder}`", f"index {folder} --db {index}`")
        print(f"Restart the clients to load it. Index: {index} ({now}). "  # noqa: T201
              f"`pocketmcp doctor {folder}` checks the setup.")
    return 0
