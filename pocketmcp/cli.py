"""Command line: argv and environment -> Config -> anyio.run."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import anyio
import msgspec

from pocketmcp import __version__, logs
from pocketmcp.config import SETTINGS, Config, load
from pocketmcp.embed.models import canonical_id
from pocketmcp.errors import PocketError, single
from pocketmcp.mcp.serve import serve
from pocketmcp.ops import evaluate
from pocketmcp.ops.search import MODES, Mode, Params, search
from pocketmcp.runtime import INDEXING, READING, WATCHING, Plan, Runtime, open_runtime


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

    p = sub.add_parser("eval", help="measure retrieval quality on a BEIR-format data set")
    p.add_argument("dataset", help="folder with corpus.jsonl, queries.jsonl and qrels/*.tsv")
    p.add_argument("--modes", default="hybrid,vector,keyword",
                   help="comma-separated modes to measure (default: all three)")
    p.add_argument("--split", help="qrels file to use, e.g. train (default: the first)")
    p.add_argument("--index", help="keep the index in this file and reuse it next time "
                                   "(default: a throwaway index)")
    p.add_argument("--params", help="JSON overrides of the search tuning, e.g. "
                                    "'{\"vector_weight\": 0.5}'")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    _add_settings(p)

    p = sub.add_parser(
        "serve", help="run the MCP server on stdio (the default when no command is given)")
    _add_serve_flags(p)
    _add_settings(p)

    p = sub.add_parser("search", help="search the index")
    p.add_argument("query")
    p.add_argument("-k", "--top-k", type=int, default=8, help="number of hits (1-100)")
    p.add_argument("--mode", choices=("hybrid", "vector", "keyword"), default="hybrid",
                   help="hybrid (default): meaning and keywords fused")
    p.add_argument("--unique-docs", action="store_true", help="one hit per document")
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
        if args.command == "eval":
            return anyio.run(_eval, config, args, backend="asyncio")
        if args.command == "serve":
            return anyio.run(serve, config, args.title, args.inst, backend="asyncio")
    except BaseExceptionGroup as group:
        return _failed(single(group))
    except Exception as exc:  # the one place that catches everything: report, exit non-zero
        return _failed(exc)
    except KeyboardInterrupt:
        return 130
    parser.error(f"unknown command {args.command}")
    return 2


def _failed(exc: BaseException) -> int:
    if isinstance(exc, KeyboardInterrupt):
        return 130
    if isinstance(exc, PocketError):
        print(f"pocketmcp: {exc}", file=sys.stderr)  # noqa: T201
        return 1
    if isinstance(exc, Exception):
        logs.get("pocketmcp").error("crashed", error=repr(exc), exc_info=exc)
        return 1
    raise exc


async def _stop_on_signals(runtime: Runtime, everything: anyio.CancelScope) -> None:
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


async def _fed(config: Config, plan: Plan, *, progress: bool = False,
               on_event: Any = None) -> Runtime:
    """Open the runtime and wait until its feed has run to its end (a scan), or until
    SIGINT/SIGTERM; the runtime, closed, with its pipeline's counts."""
    with anyio.CancelScope() as everything:
        async with open_runtime(config, plan, on_event=on_event
                                ) as runtime, anyio.create_task_group() as tg:
            tg.start_soon(_stop_on_signals, runtime, everything, name="pocketmcp.signals")
            if progress:
                tg.start_soon(_progress, runtime, name="pocketmcp.progress")
            await runtime.fed.wait()
            tg.cancel_scope.cancel()
    if everything.cancelled_caught:
        raise KeyboardInterrupt
    if runtime.pipeline is None:
        raise PocketError(runtime.status.last_error or "indexing did not start")
    return runtime


async def _index(config: Config, args: argparse.Namespace) -> int:
    if not config.watch_dir.is_dir():
        raise PocketError(f"WATCH_DIR={config.watch_dir} is not a folder")
    started = time.perf_counter()
    plan = msgspec.structs.replace(INDEXING, rebuild=args.rebuild, force=args.force)
    show = args.progress == "on" or (args.progress == "auto" and sys.stderr.isatty())
    runtime = await _fed(config, plan, progress=show)
    assert runtime.pipeline is not None
    s = runtime.pipeline.stats
    summary = {
        "folder": str(config.watch_dir), "index": str(config.sqlite_path),
        "files_seen": s.seen, "added": s.added, "updated": s.updated,
        "unchanged": s.unchanged, "removed": s.removed, "skipped": s.skipped,
        "chunks_embedded": s.chunks_embedded, "chunks_reused": s.chunks_reused,
        "elapsed_s": round(time.perf_counter() - started, 2),
        "pipeline_s": round(runtime.fed_seconds, 3), "embed_s": round(s.embed_ms / 1000, 3),
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


async def _progress(runtime: Runtime) -> None:
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


async def _watch(config: Config) -> int:
    if not config.watch_dir.is_dir():
        raise PocketError(f"WATCH_DIR={config.watch_dir} is not a folder")
    log = logs.get("pocketmcp.watch")
    log.info("watching", folder=str(config.watch_dir), index=str(config.sqlite_path),
             model=canonical_id(config.model_id))
    runtime = await _fed(config, WATCHING, on_event=logs.events("pocketmcp.watch"))
    assert runtime.pipeline is not None
    log.info("stopped", **msgspec.structs.asdict(runtime.pipeline.stats))
    return 0


async def _eval(config: Config, args: argparse.Namespace) -> int:
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = [m for m in modes if m not in MODES]
    if unknown or not modes:
        raise PocketError(f"--modes {args.modes!r} is not valid: it accepts "
                          + ", ".join(MODES))
    try:
        params = msgspec.convert(json.loads(args.params), Params) if args.params else Params()
    except (ValueError, msgspec.ValidationError) as exc:
        raise PocketError(f"--params is not valid: {exc}") from None
    dataset_dir = Path(args.dataset)
    dataset = evaluate.load_dataset(dataset_dir, args.split)
    with tempfile.TemporaryDirectory(prefix="pocketmcp-eval-") as tmp:
        db = Path(args.index) if args.index else Path(tmp) / "index.db"
        corpus = db.with_name(db.name + ".corpus")
        files = await anyio.to_thread.run_sync(evaluate.write_corpus, corpus, dataset_dir)
        config = config.replace(watch_dir=corpus, sqlite_path=db, watch_dir_given=True)
        started = time.perf_counter()
        plan = Plan(writer="must", feed="scan", requests=False)
        async with open_runtime(config, plan) as runtime:
            async with anyio.create_task_group() as tg:
                if sys.stderr.isatty():
                    tg.start_soon(_progress, runtime, name="pocketmcp.progress")
                await runtime.fed.wait()
                tg.cancel_scope.cancel()
            await runtime.started()  # raises when start-up failed
            assert runtime.pipeline is not None
            stats = runtime.pipeline.stats
            built = {"files": stats.seen, "chunks_embedded": stats.chunks_embedded,
                     "seconds": round(time.perf_counter() - started, 1)}
            reading = await runtime.reading()
            counts = await reading.index.run(lambda r: r.counts())
            metrics = await evaluate.evaluate(reading, dataset, cast(list[Mode], modes), params)
    report = evaluate.report(dataset_dir, files, dataset, counts["chunks"], built, params,
                             metrics)
    print(json.dumps(report, indent=2) if args.json else evaluate.table(report))  # noqa: T201
    return 0


async def _search(config: Config, args: argparse.Namespace) -> int:
    if not 1 <= args.top_k <= 100:
        raise PocketError(f"-k {args.top_k} is not valid: -k accepts 1 to 100")
    if not config.sqlite_path.exists():
        raise PocketError(f"no index at {config.sqlite_path}; run `pocketmcp index` first")
    if config.log_level == "info":
        logs.configure("warning")  # the hits are the output; start-up chatter is not
    async with open_runtime(config, READING) as runtime:
        await runtime.started()
        result = await search(await runtime.reading(), args.query, top_k=args.top_k,
                              mode=args.mode, unique_docs=args.unique_docs)
    rows = [{"rank": i + 1, "score": m.score, "vector_score": m.vector_score,
             "keyword_score": m.keyword_score, "path": m.path or m.title, "title": m.title,
             "chunk_id": m.chunk_id, "resource": m.resource, "preview": m.preview}
            for i, m in enumerate(result.matches)]
    if args.json:
        print(json.dumps({"query": args.query, "mode": args.mode, "hits": rows},  # noqa: T201
                         ensure_ascii=False))
    else:
        for r in rows:
            print(f"{r['rank']:>2}. {r['score']:.3f}  {r['path']}\n    {r['preview']}")  # noqa: T201
        if not rows:
            print("no matches")  # noqa: T201
    return 0
