"""`pocketmcp export FILE`, `pocketmcp import FILE` and `pocketmcp backup FILE`."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import anyio
from pydantic import BaseModel

from pocketmcp.config import Config
from pocketmcp.ops import archive
from pocketmcp.plans import Plan
from pocketmcp.runtime import open_runtime

# The writer of the index and nothing else: no folder, no vectors in memory.
IMPORTING = Plan(writer="must", feed="none", requests=True, search=False)


def _print(result: BaseModel, as_json: bool, text: str) -> None:
    print(json.dumps(result.model_dump()) if as_json else text)  # noqa: T201


async def export(config: Config, args: argparse.Namespace) -> int:
    result = await archive.export(config.main_place(), Path(args.file))
    waiting = (f"; {result.chunks_waiting} chunks waited for their vectors and were exported "
               "without them" if result.chunks_waiting else "")
    _print(result, args.json, f"exported {result.documents} documents ({result.chunks} "
                              f"chunks, {result.bytes} bytes) to {result.path}{waiting}")
    return 0


async def backup(config: Config, args: argparse.Namespace) -> int:
    place = config.main_place()
    result = await archive.backup(place, Path(args.file))
    _print(result, args.json, f"backed up {place.describe()} to {result.path} "
                              f"({result.bytes} bytes, {result.elapsed_ms} ms)")
    return 0


async def restore(config: Config, args: argparse.Namespace) -> int:
    path, roots = Path(args.file), config.ingest.roots()
    limits = (config.pipeline.max_file_bytes, config.pipeline.max_chunks_per_doc)
    if not await anyio.to_thread.run_sync(config.main_place().exists):
        # Checked before an index is made to take it: a file refused leaves no index behind.
        await anyio.to_thread.run_sync(archive.check, path, roots, limits)
    async with open_runtime(config, IMPORTING) as runtime:
        await runtime.started()
        result = await archive.import_file(runtime.writing, path,
                                           identity=runtime.services.identity, roots=roots,
                                           max_bytes=limits[0], most_chunks=limits[1])
    how = "vectors reused" if result.same_model else (
        f"another model: {result.chunks_embedded} chunks embedded again")
    if result.chunks_waiting:
        how += (f"; {result.chunks_waiting} chunks wait for their vectors (found by keywords "
                "until then): a running server embeds them, or `pocketmcp index`")
    _print(result, args.json, f"imported {result.documents} documents ({result.chunks} "
                              f"chunks, {how}) into {config.main_place().describe()}")
    return 0
