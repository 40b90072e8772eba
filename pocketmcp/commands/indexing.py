"""`pocketmcp index` (one scan of the folder) and `pocketmcp watch` (a scan, then follow it)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from typing import Any

import anyio
import msgspec

from pocketmcp import logs
from pocketmcp.commands.choosing import not_a_folder
from pocketmcp.commands.progress import Rechecked, Style, style_of, until_fed
from pocketmcp.commands.unfinished import unfinished
from pocketmcp.config import Config
from pocketmcp.errors import PocketError, WriterBusyError
from pocketmcp.ops.index import model_named
from pocketmcp.pipeline.state import Stats
from pocketmcp.plans import INDEXING, WATCHING, Plan
from pocketmcp.runtime import Runtime, on_signals, open_runtime
from pocketmcp.store.api import Place


def stopper(runtime: Runtime, everything: anyio.CancelScope,
            signals: list[str] | None = None) -> Callable[[str], None]:
    """What a signal does: the first stops, committing what is in flight; the second stops
    at once (a transaction already started still commits or rolls back whole). The names
    of the signals received are added to `signals`."""
    signals = [] if signals is None else signals

    def stop(name: str) -> None:
        signals.append(name)
        if len(signals) > 1:
            everything.cancel()
        else:
            runtime.stop()

    return stop


async def fed(config: Config, plan: Plan, *, progress: Style | None = None,
              on_event: Any = None, signals: list[str] | None = None) -> Runtime:
    """Open the runtime and wait until its feed has run to its end (a scan), or until
    SIGINT/SIGTERM (their names added to `signals`); the runtime, closed, with its
    pipeline's counts."""
    with anyio.CancelScope() as everything:
        async with open_runtime(config, plan, on_event=on_event
                                ) as runtime, anyio.create_task_group() as tg:
            tg.start_soon(on_signals, stopper(runtime, everything, signals),
                          name="pocketmcp.signals")
            await until_fed(runtime, config, progress)
            tg.cancel_scope.cancel()
    if everything.cancelled_caught:
        raise KeyboardInterrupt
    if runtime.feed is None:
        raise PocketError(runtime.status.last_error or "indexing did not start")
    return runtime


def _commits() -> Callable[[dict[str, Any]], None]:
    """Each write of `index` as a debug line (LOG_LEVEL=debug): with its commit's number and
    time, what a run's end is measured against."""
    log = logs.get("pocketmcp.index")

    def on_event(event: dict[str, Any]) -> None:
        fields = dict(event)
        log.debug(fields.pop("event"), **fields)

    return on_event


# `pocketmcp index` exit codes (README "Scheduled indexing"); 1 is any failure.
EXIT_OK = 0  # every file indexed (or unchanged)
EXIT_PARTIAL = 3  # indexed, but some files were skipped: the summary names them
EXIT_BUSY = 4  # another process holds the index's writer lock: nothing written
# Stopped by a signal (128 + its number): what was committed stays, the summary names the
# files left unfinished, and the next run completes them.
EXIT_SIGNAL = {"SIGINT": 130, "SIGTERM": 143}
LOCK_POLL_S = 0.5


async def wait_for_lock(place: Place, wait_s: float) -> bool:
    """Wait up to `wait_s` seconds for the writer lock of the index at `place` to be free."""
    deadline = time.monotonic() + wait_s
    logged = False
    while await anyio.to_thread.run_sync(place.writer_held):
        if time.monotonic() >= deadline:
            return False
        if not logged:
            logs.get("pocketmcp.index").info("waiting_for_writer_lock",
                                             index=place.describe(), wait_s=wait_s)
            logged = True
        await anyio.sleep(min(LOCK_POLL_S, max(deadline - time.monotonic(), 0.01)))
    return True


async def index(config: Config, args: argparse.Namespace) -> int:
    if not config.watched.root.is_dir():
        raise PocketError(not_a_folder(config.watched.root.absolute()))
    started = time.perf_counter()
    plan = msgspec.structs.replace(INDEXING, rebuild=args.rebuild, force=args.force,
                                   keywords_first=getattr(args, "keywords_first", False))
    deadline = time.monotonic() + args.wait
    place = config.main_place()
    signals: list[str] = []
    while True:
        # Two runs never both write a SQLite index: the writer lock decides, and a second run
        # waits for it (--wait) or ends with EXIT_BUSY having written nothing. A Postgres
        # index takes several writers (per-document locks): its lock is never held.
        if await wait_for_lock(place, max(deadline - time.monotonic(), 0)):
            try:
                runtime = await fed(config, plan,
                                    progress=style_of(args.progress, tty=sys.stderr.isatty()),
                                    signals=signals, on_event=_commits())
                break
            except WriterBusyError:  # taken between the check and the start: wait again
                pass
        if time.monotonic() >= deadline:
            print(f"pocketmcp: another process is writing {place.describe()} (a `watch`, "  # noqa: T201
                  f"`serve` or another `index`); waited {args.wait:g} s and wrote nothing. "
                  "A running `watch` or `serve` keeps the index up to date itself; to wait "
                  "for another `index` to finish, pass --wait SECONDS.", file=sys.stderr)
            return EXIT_BUSY
    assert runtime.feed is not None
    s = runtime.feed.stats
    counts = s.counts()
    embedder = runtime.services.embedder
    identity, usage = embedder.identity, embedder.usage
    summary = {
        "folder": str(config.watched.root),
        "index": runtime.services.main.index.where,
        # One definition of each count (Stats.counts), as the log and the status tool give
        # them: a file re-read by force with the same text is unchanged to the reader.
        "files_seen": s.seen, **counts,
        "chunks_keywords": s.chunks_written, "chunks_vectors": s.chunks_vectors,
        "chunks_waiting": s.chunks_waiting,
        "elapsed_s": round(time.perf_counter() - started, 2),
        "pipeline_s": round(runtime.fed_seconds, 3), "embed_s": round(s.embed_ms / 1000, 3),
        "provider": identity.provider, "model": identity.model,
        "provider_calls": usage.calls, "provider_tokens": usage.tokens,
        "provider_retries": usage.retries, "provider_s": round(usage.seconds, 3),
        "skipped_files": [{"path": path, "reason": why} for path, why in s.recent_skips],
        "cut_files": [{"path": path, "left": left} for path, left in s.cut],
    }
    if args.force:
        summary["rechecked"] = s.added + s.updated + s.unchanged  # every file read
    left: list[str] = []
    if signals:
        left, cut = await unfinished(config, runtime.services.main.index.dim,
                                     {path for path, _ in s.recent_skips})
        summary.update(interrupted_by=signals[0], unfinished_files=left,
                       unfinished_listed_in_full=not cut)
    spent = (f"  embedding: {identity.provider} {identity.model}, {usage.calls} calls, "
             + (f"{usage.tokens} tokens sent, {usage.retries} retries, " if
                identity.provider != "local" else "")
             + f"{usage.seconds:.1f} s\n")
    if args.json:
        print(json.dumps(summary))  # noqa: T201
    else:
        print(  # noqa: T201
            f"indexed {summary['folder']} -> {summary['index']}\n"
            f"  files: {s.added} added, {summary['updated']} updated, "
            f"{summary['unchanged']} unchanged, {s.removed} removed, {s.skipped} skipped"
            + (f", {s.no_text} with no text found" if s.no_text else "") + "\n"
            f"  chunks: {s.chunks_embedded} embedded, {s.chunks_reused} reused, "
            f"{s.chunks_removed} removed ({s.chunks_written} keyword-indexed, "
            f"{s.chunks_waiting} waiting for vectors)\n"
            + (Rechecked.line(summary) if args.force else "")
            + f"{spent}"
            f"  elapsed: {summary['elapsed_s']} s"
        )
        if s.skipped:
            shown = "" if s.skipped <= len(s.recent_skips) else (
                f" (the last {len(s.recent_skips)} of {s.skipped})")
            print(f"skipped{shown}:", *(f"  {path}: {why}" for path, why in s.recent_skips),  # noqa: T201
                  sep="\n")
        if s.cut:
            shown = "" if s.cut_files <= len(s.cut) else (
                f" (the last {len(s.cut)} of {s.cut_files})")
            print(f"indexed in part{shown}:",  # noqa: T201
                  *(f"  {path}: {left}" for path, left in s.cut), sep="\n")
        if signals:
            more = " (and more)" if summary["unfinished_listed_in_full"] is False else ""
            waiting = (f" and {s.chunks_waiting} chunks waiting for vectors"
                       if s.chunks_waiting else "")
            print(f"interrupted by {signals[0]}: {len(left)} files unfinished{more}{waiting}; "  # noqa: T201
                  "the next `pocketmcp index` completes them" + (":" if left else ""),
                  *(f"  {path}" for path in left), sep="\n")
    if signals:
        return EXIT_SIGNAL.get(signals[0], 130)
    return EXIT_PARTIAL if s.skipped else EXIT_OK


async def watch(config: Config) -> int:
    if not config.watched.root.is_dir():
        raise PocketError(not_a_folder(config.watched.root.absolute()))
    log = logs.get("pocketmcp.watch")
    log.info("watching", folder=str(config.watched.root), index=config.main_place().describe(),
             provider=config.embed.provider,
             model=model_named(config.embed.provider, config.embed.model))
    runtime = await fed(config, WATCHING, on_event=logs.events("pocketmcp.watch"))
    assert runtime.feed is not None
    # The first scan was reported when it ended (initial_indexing_done); this is what
    # changed since, so no file is counted twice.
    log.info("stopped", **since(runtime.feed.stats, runtime.scanned))
    return 0


def since(now: Stats, then: Stats | None) -> dict[str, int]:
    """The counts of `now` minus those of `then` (all of `now` when the scan never ended)."""
    before = then.counts() if then else {}
    return {key: value - before.get(key, 0) for key, value in now.counts().items()}
