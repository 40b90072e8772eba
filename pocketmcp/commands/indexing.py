"""`pocketmcp index` (one scan of the folder) and `pocketmcp watch` (a scan, then follow it)."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from typing import Any

import anyio
import msgspec

from pocketmcp import logs
from pocketmcp.config import Config
from pocketmcp.embed.models import canonical_id
from pocketmcp.errors import PocketError
from pocketmcp.plans import INDEXING, WATCHING, Plan
from pocketmcp.runtime import Runtime, open_runtime


async def stop_on_signals(runtime: Runtime, everything: anyio.CancelScope) -> None:
    """First SIGINT/SIGTERM: stop, committing what is in flight. Second: stop at once (a
    transaction already started still commits or rolls back whole)."""
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        stopping = False
        async for _ in signals:
            if stopping:
                everything.cancel()
                return
            stopping = True
            runtime.stop()


async def fed(config: Config, plan: Plan, *, progress: bool = False,
               on_event: Any = None) -> Runtime:
    """Open the runtime and wait until its feed has run to its end (a scan), or until
    SIGINT/SIGTERM; the runtime, closed, with its pipeline's counts."""
    with anyio.CancelScope() as everything:
        async with open_runtime(config, plan, on_event=on_event
                                ) as runtime, anyio.create_task_group() as tg:
            tg.start_soon(stop_on_signals, runtime, everything, name="pocketmcp.signals")
            if progress:
                tg.start_soon(progress_bar, runtime, name="pocketmcp.progress")
            await runtime.fed.wait()
            tg.cancel_scope.cancel()
    if everything.cancelled_caught:
        raise KeyboardInterrupt
    if runtime.pipeline is None:
        raise PocketError(runtime.status.last_error or "indexing did not start")
    return runtime


async def index(config: Config, args: argparse.Namespace) -> int:
    if not config.watch_dir.is_dir():
        raise PocketError(f"WATCH_DIR={config.watch_dir} is not a folder")
    started = time.perf_counter()
    plan = msgspec.structs.replace(INDEXING, rebuild=args.rebuild, force=args.force)
    show = args.progress == "on" or (args.progress == "auto" and sys.stderr.isatty())
    runtime = await fed(config, plan, progress=show)
    assert runtime.pipeline is not None and runtime.embedder is not None
    s = runtime.pipeline.stats
    identity, usage = runtime.embedder.identity, runtime.embedder.usage
    summary = {
        "folder": str(config.watch_dir),
        "index": runtime.main.where if runtime.main is not None else str(config.sqlite_path),
        "files_seen": s.seen, "added": s.added, "updated": s.updated,
        "unchanged": s.unchanged, "removed": s.removed, "skipped": s.skipped,
        "chunks_embedded": s.chunks_embedded, "chunks_reused": s.chunks_reused,
        "elapsed_s": round(time.perf_counter() - started, 2),
        "pipeline_s": round(runtime.fed_seconds, 3), "embed_s": round(s.embed_ms / 1000, 3),
        "provider": identity.provider, "model": identity.model,
        "provider_calls": usage.calls, "provider_tokens": usage.tokens,
        "provider_retries": usage.retries, "provider_s": round(usage.seconds, 3),
    }
    spent = (f"  embedding: {identity.provider} {identity.model}, {usage.calls} calls, "
             + (f"{usage.tokens} tokens sent, {usage.retries} retries, " if
                identity.provider != "local" else "")
             + f"{usage.seconds:.1f} s\n")
    if args.json:
        print(json.dumps(summary))  # noqa: T201
    else:
        print(  # noqa: T201
            f"indexed {summary['folder']} -> {summary['index']}\n"
            f"  files: {s.added} added, {s.updated} updated, {s.unchanged} unchanged, "
            f"{s.removed} removed, {s.skipped} skipped\n"
            f"  chunks: {s.chunks_embedded} embedded, {s.chunks_reused} reused\n"
            f"{spent}"
            f"  elapsed: {summary['elapsed_s']} s"
        )
    return 0


async def progress_bar(runtime: Runtime) -> None:
    from tqdm import tqdm  # only with a progress bar: kept out of the other commands

    with tqdm(total=0, unit="file", file=sys.stderr, dynamic_ncols=True) as bar:
        while True:
            if runtime.pipeline is not None:
                s = runtime.pipeline.stats
                bar.total = max(s.seen, s.processed)
                bar.n = s.processed
                bar.set_postfix(chunks=s.chunks_embedded, reused=s.chunks_reused,
                                refresh=False)
                bar.refresh()
            await anyio.sleep(0.25)


async def watch(config: Config) -> int:
    if not config.watch_dir.is_dir():
        raise PocketError(f"WATCH_DIR={config.watch_dir} is not a folder")
    log = logs.get("pocketmcp.watch")
    log.info("watching", folder=str(config.watch_dir), index=str(config.sqlite_path),
             provider=config.embed_provider,
             model=config.embed_model or canonical_id(config.model_id))
    runtime = await fed(config, WATCHING, on_event=logs.events("pocketmcp.watch"))
    assert runtime.pipeline is not None
    log.info("stopped", **msgspec.structs.asdict(runtime.pipeline.stats))
    return 0
