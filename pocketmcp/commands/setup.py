"""`pocketmcp init` (write the MCP clients' configurations) and `pocketmcp doctor` (check
what a working setup needs and say what to fix)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import anyio

from pocketmcp.commands.clients import (
    CLIENTS,
    Client,
    clients,
    command,
    entry,
    ephemeral,
    merge,
    read_config,
    snippet,
)
from pocketmcp.config import Config
from pocketmcp.errors import PocketError


def _chosen(args: argparse.Namespace) -> list[Client]:
    known = clients()
    names = args.client or list(CLIENTS)
    if args.config_file:
        if len(names) != 1:
            raise PocketError("--config-file names one file: give one --client with it")
        base = known[names[0]]
        return [Client(base.name, base.title, Path(args.config_file), base.key)]
    return [known[n] for n in names]


def _folder(config: Config, args: argparse.Namespace) -> Path:
    given = args.dir or (str(config.watch_dir) if config.watch_dir_given else None)
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
        Path.home() / ".local" / "share" / "pocketmcp" / f"{name}.db")
    chosen = _chosen(args)
    for client in chosen:
        server = entry(client, folder, index, args.title)
        if args.print:
            where = ("run" if client.name == "claude-code" else f"add to {client.path}")
            print(f"# {client.title}: {where}\n{snippet(client, name, server)}\n")  # noqa: T201
            continue
        how, backup = merge(client, name, server)
        kept = f" (the previous file is kept as {backup})" if backup else ""
        print(f"{client.title}: {how} the server {name!r} in {client.path}{kept}")  # noqa: T201
    if not args.print and ephemeral(command()):
        print(f"Note: {command()[0]} is in uv's cache (uvx); the entry stops working once "  # noqa: T201
              "the cache is cleaned: `uv tool install` or `pipx install` PocketMCP and run "
              "`pocketmcp init` again for an entry that lasts.")
    if not args.print:
        print(f"Restart the clients to load it. It indexes {folder} into {index} on first "  # noqa: T201
              f"start; `pocketmcp index {folder} --db {index}` does it now, with progress.")
    return 0


class Report:
    """Doctor's findings, one line each: ok, warn or FAIL, with what to do."""

    def __init__(self) -> None:
        self.failed = 0

    def ok(self, what: str) -> None:
        print(f"ok    {what}")  # noqa: T201

    def warn(self, what: str, fix: str) -> None:
        print(f"warn  {what}\n      -> {fix}")  # noqa: T201

    def fail(self, what: str, fix: str) -> None:
        self.failed += 1
        print(f"FAIL  {what}\n      -> {fix}")  # noqa: T201


async def doctor(config: Config, args: argparse.Namespace) -> int:
    report = Report()
    _check_folder(config, report)
    await _check_model(config, report)
    await _check_index(config, report)
    from pocketmcp.mcp.sharing import described  # the shared server, if one runs

    report.ok(await described(config.sqlite_path, config.token, on=config.share == "on"))
    for client in _chosen(args):
        _check_client(client, report)
    print("all good" if not report.failed else f"{report.failed} problem(s) to fix")  # noqa: T201
    return 1 if report.failed else 0


def _check_folder(config: Config, report: Report) -> None:
    from pocketmcp.commands.progress import count_files  # lists the folder

    folder = config.watch_dir.absolute()
    if not folder.is_dir():
        report.fail(f"folder {folder} does not exist",
                    "set WATCH_DIR (or --data-folder) to the folder of your documents")
        return
    files = count_files(config)
    if files == 0:
        report.warn(f"folder {folder}: no file matches INCLUDE_GLOBS",
                    "check INCLUDE_GLOBS, IGNORE_PATTERNS and the folder's .gitignore")
    else:
        report.ok(f"folder {folder}: {files} files to index")


async def _check_model(config: Config, report: Report) -> None:
    from pocketmcp.embed import factory  # the model libraries, only for this check

    embed = config.embed_settings()
    try:
        want = await anyio.to_thread.run_sync(factory.wanted, embed)
        if want.identity.provider != "local":
            report.ok(f"model: {want.identity.provider} {want.identity.model} (remote; not "
                      "called by doctor)")
            return
        embedder = await anyio.to_thread.run_sync(factory.make, embed, want, want.identity)
        try:
            await embedder.embed_query("doctor")
        finally:
            await embedder.aclose()
    except (PocketError, OSError, ValueError, RuntimeError) as exc:
        report.fail(f"model {config.model_id}: {exc}",
                    "reinstall PocketMCP (the model comes with its dependencies) or set "
                    "MODEL_PATH to a local model folder")
        return
    report.ok(f"model {want.identity.model} loads and embeds offline")


async def _check_index(config: Config, report: Report) -> None:
    from pocketmcp.embed import factory
    from pocketmcp.mcp.discovery import find

    place = config.main_place()
    index = place.describe()
    try:
        made = await anyio.to_thread.run_sync(place.exists)
    except PocketError as exc:
        report.fail(f"index {index}: {exc}", "check DATABASE_URL and that the server runs")
        return
    if not made:
        report.warn(f"index {index} does not exist yet",
                    "run `pocketmcp index` (or start the server: it indexes on start)")
        return
    try:
        stored = await anyio.to_thread.run_sync(place.identity)
        want = await anyio.to_thread.run_sync(factory.wanted, config.embed_settings())
    except PocketError as exc:
        report.fail(f"index {index}: {exc}", "`pocketmcp index --rebuild` makes it anew")
        return
    if stored is not None and (stored.provider, stored.model) != (
            want.identity.provider, want.identity.model):
        report.fail(f"index {index} was built with {stored.describe()}, the settings ask "
                    f"for {want.identity.provider} {want.identity.model}",
                    "set the index's model again, or `pocketmcp index --rebuild`")
    else:
        report.ok(f"index {index}" + (f" ({stored.describe()})" if stored else ""))
    server = find(config.sqlite_path)
    if await anyio.to_thread.run_sync(place.writer_held):
        via = f" (an HTTP server at {server.url})" if server else ""
        report.ok(f"writer lock held by a running PocketMCP{via}: it keeps the index "
                  "up to date; `pocketmcp index` exits with code 4 meanwhile")
    else:
        report.ok("writer lock free: no PocketMCP is writing the index now")


def _check_client(client: Client, report: Report) -> None:
    if not client.path.exists():
        report.ok(f"{client.title}: no configuration at {client.path} (`pocketmcp init "
                  f"--client {client.name}` writes one)")
        return
    try:
        data = read_config(client.path)
    except PocketError as exc:
        problem = str(exc).split("; nothing was written")[0]
        report.fail(f"{client.title}: {problem}",
                    f"fix {client.path} (it must be JSON; comments and trailing commas are fine)")
        return
    servers = data.get(client.key) or {}
    ours = {name: s for name, s in servers.items() if isinstance(s, dict) and "pocketmcp" in
            json.dumps(s)}
    if not ours:
        report.ok(f"{client.title}: {client.path} has no PocketMCP server (`pocketmcp init "
                  f"--client {client.name}` adds one)")
        return
    for name, server in ours.items():
        exe = Path(str(server.get("command", "")))
        env = server.get("env") or {}
        folder = env.get("WATCH_DIR")
        if not exe.is_file():
            report.fail(f"{client.title}: server {name!r} runs {exe}, which does not exist",
                        f"`pocketmcp init --client {client.name}` writes the current path")
        elif folder and not Path(folder).is_dir():
            report.fail(f"{client.title}: server {name!r} watches {folder}, not a folder",
                        f"`pocketmcp init FOLDER --client {client.name}`")
        else:
            report.ok(f"{client.title}: server {name!r} in {client.path}")
