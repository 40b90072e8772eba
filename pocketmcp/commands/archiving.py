"""`pocketmcp export FILE`, `pocketmcp import FILE` and `pocketmcp backup FILE`."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from pydantic import BaseModel

from pocketmcp.config import Config
from pocketmcp.errors import NotSupported, PocketError
from pocketmcp.ops import archive
from pocketmcp.plans import Plan
from pocketmcp.runtime import open_runtime
from pocketmcp.store import places

# The writer of the index and nothing else: no folder, no vectors in memory.
IMPORTING = Plan(writer="must", feed="none", requests=True, search=False)


def _existing_index(config: Config) -> Path:
    if not config.sqlite_path.exists():
        raise PocketError(f"no index at {config.sqlite_path}; run `pocketmcp index` first")
    return config.sqlite_path


def _print(result: BaseModel, as_json: bool, text: str) -> None:
    print(json.dumps(result.model_dump()) if as_json else text)  # noqa: T201


async def export(config: Config, args: argparse.Namespace) -> int:
    where = places.main_index(config) if config.store == "postgres" else _existing_index(config)
    result = await archive.export(where, Path(args.file))
    _print(result, args.json, f"exported {result.documents} documents ({result.chunks} "
                              f"chunks, {result.bytes} bytes) to {result.path}")
    return 0


async def backup(config: Config, args: argparse.Namespace) -> int:
    if config.store == "postgres":
        raise NotSupported("backup copies a SQLite index file; back up a Postgres index with "
                           f"pg_dump -n {config.pg_schema} (or the server's own backups), "
                           "or export it with `pocketmcp export FILE`")
    result = await archive.backup(_existing_index(config), Path(args.file))
    _print(result, args.json, f"backed up {config.sqlite_path} to {result.path} "
                              f"({result.bytes} bytes, {result.elapsed_ms} ms)")
    return 0


async def restore(config: Config, args: argparse.Namespace) -> int:
    async with open_runtime(config, IMPORTING) as runtime:
        await runtime.started()
        assert runtime.identity is not None
        result = await archive.import_file(runtime.writing, Path(args.file),
                                           identity=runtime.identity)
    how = "vectors reused" if result.same_model else (
        f"another model: {result.chunks_embedded} chunks embedded again")
    _print(result, args.json, f"imported {result.documents} documents ({result.chunks} "
                              f"chunks, {how}) into {_shown(config)}")
    return 0


def _shown(config: Config) -> str:
    where = places.main_index(config)
    return str(where) if isinstance(where, Path) else where.describe()
