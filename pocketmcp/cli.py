"""Command line: argv and environment -> Config -> anyio.run."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

import anyio

from pocketmcp import __version__, logs
from pocketmcp.config import Config, load
from pocketmcp.errors import PocketError, single
from pocketmcp.settings import SETTINGS


def _add_settings(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("settings (each overrides its environment variable)")
    for s in SETTINGS:
        if not s.flag:
            continue  # environment only
        kwargs: dict[str, Any] = {"dest": s.field, "default": None, "metavar": s.env,
                                  # argparse formats help with %: a literal one is %%
                                  "help": f"{s.help} [{s.env}, default {s.default!r}]"
                                          .replace("%", "%%")}
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
                   help="empty the index first (needed after changing the embedding model, "
                        "provider, dimensions or prefixes)")
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
    p.add_argument("--corpus", help="index this folder as the corpus (no corpus.jsonl needed); "
                                    "corpus ids are file paths relative to it, e.g. "
                                    "docs/config/build.md")
    p.add_argument("--index", help="keep the index in this file and reuse it next time "
                                   "(default: a throwaway index)")
    p.add_argument("--params", help="JSON overrides of the search tuning, e.g. "
                                    "'{\"vector_weight\": 0.5}'")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    _add_settings(p)

    p = sub.add_parser(
        "serve", help="run the MCP server: on stdio (the default when no command is given), or "
                      "over HTTP for many clients (--transport http)")
    _add_serve_flags(p)
    _add_settings(p)

    p = sub.add_parser("open", help="print a one-time login link to the web page of the "
                                    "HTTP server serving this index")
    _add_settings(p)

    p = sub.add_parser("search", help="search the index")
    p.add_argument("query")
    p.add_argument("-k", "--top-k", type=int, default=8, help="number of hits (1-100)")
    p.add_argument("--mode", choices=("hybrid", "vector", "keyword"), default="hybrid",
                   help="hybrid (default): meaning and keywords fused")
    p.add_argument("--unique-docs", action="store_true", help="one hit per document")
    p.add_argument("--max-per-doc", type=int, default=2,
                   help="hits per document, neighbours merged (default 2; 0: no limit)")
    p.add_argument("--json", action="store_true",
                   help="print hits as JSON (the fields of the search tool's matches)")
    _add_filter_flags(p)
    _add_settings(p)

    for name, help_text in (
        ("export", "write every document, chunk and vector of the index to FILE (JSON Lines)"),
        ("import", "add the documents of an export FILE to the index (vectors reused when "
                   "the model matches)"),
        ("backup", "copy the index to FILE, consistently, even while a server writes it"),
    ):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("file", metavar="FILE")
        p.add_argument("--json", action="store_true", help="print the summary as JSON")
        _add_settings(p)
    return parser


def _add_filter_flags(parser: argparse.ArgumentParser) -> None:
    when = "an ISO date or time, or a span back from now (12h, 7d, 2w, 3m, 1y)"
    parser.add_argument("--tag", action="append", metavar="TAG",
                        help="only documents with this tag (repeat: any of them)")
    parser.add_argument("--all-tags", action="append", metavar="TAG",
                        help="only documents with this tag (repeat: all of them)")
    parser.add_argument("--path", metavar="GLOB", help="only files whose path matches GLOB")
    parser.add_argument("--library", help="only this library")
    parser.add_argument("--modified-after", metavar="WHEN", help=f"changed since: {when}")
    parser.add_argument("--modified-before", metavar="WHEN", help=f"changed before: {when}")
    parser.add_argument("--created-after", metavar="WHEN", help=f"created since: {when}")
    parser.add_argument("--created-before", metavar="WHEN", help=f"created before: {when}")
    parser.add_argument("--metadata", metavar="JSON",
                        help='metadata conditions as the search tool takes them, e.g. '
                             '\'{"status": "draft", "priority": {"gte": 2}}\'')


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
        # Each command imports its own modules here: `index` does not pay for the MCP server,
        # nor `serve` for the indexing pipeline before it answers `initialize`, nor `--help`
        # for either.
        if args.command in ("index", "watch"):
            from pocketmcp.commands import indexing

            if args.command == "index":
                return anyio.run(indexing.index, config, args, backend="asyncio")
            return anyio.run(indexing.watch, config, backend="asyncio")
        if args.command == "search":
            from pocketmcp.commands import searching

            return anyio.run(searching.run, config, args, backend="asyncio")
        if args.command == "open":
            from pocketmcp.commands import web

            return anyio.run(web.login_link, config, args, backend="asyncio")
        if args.command == "eval":
            from pocketmcp.commands import evaluating

            return anyio.run(evaluating.run, config, args, backend="asyncio")
        if args.command in ("export", "import", "backup"):
            from pocketmcp.commands import archiving

            run = {"export": archiving.export, "import": archiving.restore,
                   "backup": archiving.backup}[args.command]
            return anyio.run(run, config, args, backend="asyncio")
        if args.command == "serve":
            from pocketmcp.mcp.serve import serve

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
