"""Command line: argv and environment -> Config -> anyio.run."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from collections.abc import Sequence
from typing import Any

import anyio
import msgspec

from pocketmcp import __version__, logs
from pocketmcp.config import SETTINGS, Config, load
from pocketmcp.errors import PocketError


def _add_settings(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("settings (each overrides its environment variable)")
    for s in SETTINGS:
        kwargs: dict[str, Any] = {"dest": s.field, "default": None, "metavar": s.env,
                                  "help": f"{s.help} [{s.env}, default {s.default!r}]"}
        if s.choices:
            kwargs["choices"] = s.choices
            del kwargs["metavar"]
        group.add_argument(s.flag, **kwargs)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pocketmcp",
        description="Local semantic search over a folder of documents, served over MCP.",
    )
    parser.add_argument("--version", action="version", version=f"pocketmcp {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("index", help="index the folder once, then exit")
    p.add_argument("dir", nargs="?", help="folder to index (default: WATCH_DIR)")
    p.add_argument("--rebuild", action="store_true",
                   help="empty the index first (needed after changing MODEL_ID)")
    p.add_argument("--force", action="store_true",
                   help="re-read every file even when its size and time are unchanged")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--progress", choices=("auto", "on", "off"), default="auto",
                   help="progress bar on stderr (auto: when stderr is a terminal)")
    _add_settings(p)

    p = sub.add_parser("watch", help="index the folder, then keep the index live")
    p.add_argument("dir", nargs="?", help="folder to watch (default: WATCH_DIR)")
    _add_settings(p)

    p = sub.add_parser(
        "serve", help="run the MCP server on stdio (the default when no command is given)")
    _add_serve_flags(p)
    _add_settings(p)

    p = sub.add_parser("search", help="search the index")
    p.add_argument("query")
    p.add_argument("-k", "--top-k", type=int, default=8, help="number of hits (1-50)")
    p.add_argument("--json", action="store_true", help="print hits as JSON")
    _add_settings(p)
    return parser


def _add_serve_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--exts", metavar="EXT,EXT",
                        help="file extensions to index, e.g. md,txt (sets INCLUDE_GLOBS)")
    parser.add_argument("--title", default="pocketmcp",
                        help="the server's name as clients show it (default: pocketmcp)")
    parser.add_argument("--inst", metavar="TEXT",
                        help="instructions sent to the client (default: how to use the tools)")


def _config(args: argparse.Namespace) -> Config:
    overrides = {s.field: getattr(args, s.field, None) for s in SETTINGS}
    if getattr(args, "dir", None):
        overrides["watch_dir"] = args.dir
    if getattr(args, "exts", None):
        exts = [e.strip().lstrip("*.").strip() for e in args.exts.split(",")]
        overrides["include"] = ",".join(f"**/*.{e}" for e in exts if e)
    return load(overrides)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or (argv[0].startswith("-") and argv[0] not in ("-h", "--help", "--version")):
        argv.insert(0, "serve")  # what editors launch: `pocketmcp` with flags only
    args = parser.parse_args(argv)
    try:
        config = _config(args)
        logs.configure(config.log_level)
        if args.command == "index":
            return anyio.run(_index, config, args, backend="asyncio")
        if args.command == "watch":
            return anyio.run(_watch, config, backend="asyncio")
        if args.command == "search":
            return anyio.run(_search, config, args, backend="asyncio")
        if args.command == "serve":
            from pocketmcp.serve import serve

            return anyio.run(serve, config, args.title, args.inst, backend="asyncio")
    except PocketError as exc:
        print(f"pocketmcp: {exc}", file=sys.stderr)  # noqa: T201
        return 1
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # the one place that catches everything: report, exit non-zero
        logs.get("pocketmcp").exception("crashed", error=repr(exc))
        return 1
    parser.error(f"unknown command {args.command}")
    return 2


async def _stop_on_signals(stop: Any, scope: anyio.CancelScope) -> None:
    """First SIGINT/SIGTERM: drain and stop. Second: cancel at once."""
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for _ in signals:
            if stop.stopping:
                scope.cancel()
                return
            stop.stopping = True
            stop()


async def _index(config: Config, args: argparse.Namespace) -> int:
    from pocketmcp.engine import Engine, open_writer
    from pocketmcp.model import ModelSpec
    from pocketmcp.pipeline.supervisor import Pipeline

    if not config.watch_dir.is_dir():
        raise PocketError(f"WATCH_DIR={config.watch_dir} is not a folder")
    started = time.perf_counter()
    spec = await anyio.to_thread.run_sync(ModelSpec, config)
    writer = await anyio.to_thread.run_sync(
        lambda: open_writer(config, spec, rebuild=args.rebuild))
    try:
        engine = await Engine.load(config, spec)
        pipeline = Pipeline(config, writer=writer, embed=engine.embedder.embed,
                            dim=engine.spec.dim, chunker=engine.chunker, follow=False,
                            force=args.force, embed_limiter=engine.model_limiter)
        show = args.progress == "on" or (args.progress == "auto" and sys.stderr.isatty())
        async with anyio.create_task_group() as tg:
            tg.start_soon(_stop_on_signals, _Stopper(pipeline), tg.cancel_scope,
                          name="pocketmcp.signals")
            if show:
                tg.start_soon(_progress, pipeline, name="pocketmcp.progress")
            run_started = time.perf_counter()
            await pipeline.run()
            run_s = time.perf_counter() - run_started
            tg.cancel_scope.cancel()
    finally:
        await anyio.to_thread.run_sync(writer.close)
    s = pipeline.stats
    summary = {
        "folder": str(config.watch_dir), "index": str(config.sqlite_path),
        "files_seen": s.seen, "added": s.added, "updated": s.updated,
        "unchanged": s.unchanged, "removed": s.removed, "skipped": s.skipped,
        "chunks_embedded": s.chunks_embedded, "chunks_reused": s.chunks_reused,
        "elapsed_s": round(time.perf_counter() - started, 2),
        "pipeline_s": round(run_s, 3), "embed_s": round(s.embed_ms / 1000, 3),
    }
    if args.json:
        print(json.dumps(summary))  # noqa: T201
    else:
        print(  # noqa: T201
            f"indexed {summary['folder']} -> {summary['index']}\n"
            f"  files: {s.added} added, {s.updated} updated, {s.unchanged} unchanged, "
            f"{s.removed} removed, {s.skipped} skipped\n"
            f"  chunks: {s.chunks_embedded} embedded, {s.chunks_reused} reused\n"
            f"  elapsed: {summary['elapsed_s']} s"
        )
    return 0


class _Stopper:
    def __init__(self, pipeline: Any) -> None:
        self.pipeline = pipeline
        self.stopping = False

    def __call__(self) -> None:
        self.pipeline.stop()


async def _progress(pipeline: Any) -> None:
    from tqdm import tqdm

    with tqdm(total=0, unit="file", file=sys.stderr, dynamic_ncols=True) as bar:
        while True:
            s = pipeline.stats
            bar.total = max(s.seen, s.processed)
            bar.n = s.processed
            bar.set_postfix(chunks=s.chunks_embedded, reused=s.chunks_reused, refresh=False)
            bar.refresh()
            await anyio.sleep(0.25)


async def _watch(config: Config) -> int:
    from pocketmcp.engine import Engine, open_writer
    from pocketmcp.model import ModelSpec
    from pocketmcp.pipeline.supervisor import Pipeline

    if not config.watch_dir.is_dir():
        raise PocketError(f"WATCH_DIR={config.watch_dir} is not a folder")
    log = logs.get("pocketmcp.watch")
    spec = await anyio.to_thread.run_sync(ModelSpec, config)
    writer = await anyio.to_thread.run_sync(open_writer, config, spec)

    def on_event(event: dict[str, Any]) -> None:
        kind = event.pop("event")
        log.info(kind, **event)

    try:
        engine = await Engine.load(config, spec)
        pipeline = Pipeline(config, writer=writer, embed=engine.embedder.embed,
                            dim=engine.spec.dim, chunker=engine.chunker, follow=True,
                            on_event=on_event, embed_limiter=engine.model_limiter)
        log.info("watching", folder=str(config.watch_dir), index=str(config.sqlite_path),
                 model=engine.spec.model_id)
        async with anyio.create_task_group() as tg:
            tg.start_soon(_stop_on_signals, _Stopper(pipeline), tg.cancel_scope,
                          name="pocketmcp.signals")
            await pipeline.run()
            tg.cancel_scope.cancel()
    finally:
        await anyio.to_thread.run_sync(writer.close)
    log.info("stopped", **msgspec.structs.asdict(pipeline.stats))
    return 0


async def _search(config: Config, args: argparse.Namespace) -> int:
    from pocketmcp.model import Embedder, ModelSpec
    from pocketmcp.store.queries import IndexReader

    if not 1 <= args.top_k <= 50:
        raise PocketError(f"-k {args.top_k} is not valid: -k accepts 1 to 50")
    spec = await anyio.to_thread.run_sync(ModelSpec, config)
    reader = await anyio.to_thread.run_sync(IndexReader, config.sqlite_path)
    try:
        stored = reader.model()
        if stored is not None and stored != (spec.model_id, spec.dim):
            from pocketmcp.errors import ModelMismatchError

            raise ModelMismatchError(config.sqlite_path, stored[0], stored[1], spec.model_id,
                                     spec.dim)
        embedder = await anyio.to_thread.run_sync(Embedder, spec)
        query = await anyio.to_thread.run_sync(embedder.embed_query, args.query)
        hits = await anyio.to_thread.run_sync(reader.search_vector, query.tobytes(), args.top_k)
    finally:
        reader.close()
    rows = [{"rank": i + 1, "score": round(1 - h.distance, 4), "path": h.external_id
             .removeprefix("file:"), "title": h.title, "chunk_id": h.chunk_id,
             "preview": " ".join(h.text.split())[:200]} for i, h in enumerate(hits)]
    if args.json:
        print(json.dumps({"query": args.query, "hits": rows}, ensure_ascii=False))  # noqa: T201
    else:
        for r in rows:
            print(f"{r['rank']:>2}. {r['score']:.3f}  {r['path']}\n    {r['preview']}")  # noqa: T201
        if not rows:
            print("no matches (is the index empty?)")  # noqa: T201
    return 0
