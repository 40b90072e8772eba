"""Command line: argv and environment -> Config -> anyio.run."""

from __future__ import annotations

import argparse
import gc
import os
import re
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

import anyio

from pocketmcp import __version__, logs
from pocketmcp.config import Config, declarations, load
from pocketmcp.errors import PocketError, disk_full, single
from pocketmcp.settings import REMOVED, shown


def _add_settings(parser: argparse.ArgumentParser, command: str) -> None:
    """The settings `command` reads, as flags; the others do nothing for it (each is still
    read from the environment, for the commands that use it)."""
    group = parser.add_argument_group(
        "settings (each overrides its environment variable)",
        "only those this command uses: `pocketmcp COMMAND --help` lists another's")
    for entry in declarations():
        s = entry.setting
        if not s.flag or command not in s.used_by:
            continue  # environment only, or not read by this command
        value = entry.default
        default = value if value is None or entry.kind in ("int", "float") else shown(entry,
                                                                                    value)
        kwargs: dict[str, Any] = {"dest": s.env, "default": None, "metavar": s.env,
                                  # argparse formats help with %: a literal one is %%
                                  "help": f"{_brief(s.help)} [{s.env}, default "
                                          f"{default!r}]".replace("%", "%%")}
        if entry.choices:
            kwargs["choices"] = entry.choices
            del kwargs["metavar"]
        group.add_argument(s.flag, **kwargs)


def _brief(text: str) -> str:
    """A setting's help as `--help` shows it: its first sentence (the settings reference
    has the rest)."""
    cut = re.search(r"\.\s+[A-Z]", text)
    return text if cut is None else text[:cut.start() + 1]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pocketmcp",
        description="Local semantic search over a folder of documents, served over MCP.",
    )
    parser.add_argument("--version", action="version", version=f"pocketmcp {__version__}")
    # The indexes looked at to find the one a command means (commands/choosing.py): what a
    # command lists when that index is not there.
    parser.set_defaults(indexes_seen=None)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser(
        "index", help="index the folder once, then exit",
        description="Index the folder once, then exit. Exit codes: 0 every file indexed, "
                    "3 indexed but some files skipped (listed), 4 another process is writing "
                    "the index (nothing written), 1 failure, 130 interrupted.")
    p.add_argument("dir", nargs="?", help="folder to index (default: WATCH_DIR)")
    p.add_argument("--rebuild", action="store_true",
                   help="empty the index first (needed after changing the embedding model, "
                        "provider, dimensions or prefixes)")
    p.add_argument("--force", action="store_true",
                   help="re-read every file even when its size and time are unchanged")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--keywords-first", action="store_true",
                   help="return once every file is searchable by keywords, leaving their "
                        "vectors to a running server or a later run")
    p.add_argument("--wait", type=float, default=0, metavar="SECONDS",
                   help="when another process is writing the index, wait up to SECONDS for "
                        "it (default 0: exit at once with code 4)")
    p.add_argument("--progress", choices=("auto", "bar", "lines", "off", "on"),
                   default="auto",
                   help="progress on stderr: a bar (on: the same), plain lines every "
                        "10 s and at the end, or none (auto: a bar on a terminal, lines "
                        "elsewhere)")
    _add_log_flags(p)
    _add_settings(p, "index")

    p = sub.add_parser("watch", help="index the folder, then keep the index live")
    _add_folder(p, "folder to watch (default: WATCH_DIR)")
    _add_settings(p, "watch")

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
    _add_settings(p, "eval")

    p = sub.add_parser("check-search", help="measure how well the index finds its own "
                                            "documents, from questions made of their titles, "
                                            "headings and first sentences")
    p.add_argument("--questions", type=int, default=200, help="at most this many (default 200)")
    p.add_argument("--apply", action="store_true",
                   help="keep the fusion weight that did best for this index")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    _add_folder(p)
    _add_settings(p, "check-search")

    p = sub.add_parser(
        "serve", help="run the MCP server: on stdio (the default when no command is given), or "
                      "over HTTP for many clients (--transport http)")
    _add_folder(p, "folder to serve (and watch) (default: WATCH_DIR, or the current "
                   "directory's index)")
    _add_serve_flags(p)
    _add_settings(p, "serve")

    p = sub.add_parser("open", help="print a one-time login link to the web page of the "
                                    "HTTP server serving this index")
    _add_folder(p)
    _add_settings(p, "open")

    p = sub.add_parser("search", help="search the index")
    p.add_argument("query")
    _add_folder(p)
    p.add_argument("-k", "--top-k", type=int, default=8, help="number of hits (1-100)")
    p.add_argument("--mode", choices=("hybrid", "vector", "keyword"), default="hybrid",
                   help="hybrid (default): meaning and keywords fused")
    p.add_argument("--unique-docs", action="store_true", help="one hit per document")
    p.add_argument("--max-per-doc", type=int, default=2,
                   help="hits per document, neighbours merged (default 2; 0: no limit)")
    p.add_argument("--min-score", type=float, default=None, metavar="SCORE",
                   help="leave out hits scoring less (0-1; default: the search tool's "
                        "score_threshold, 0.2; 0 keeps every hit)")
    p.add_argument("--json", action="store_true",
                   help="print hits as JSON (the fields of the search tool's matches)")
    p.add_argument("--local", action="store_true",
                   help="open the index here even when an HTTP server of it runs (by "
                        "default the search is asked of that server: no model to load)")
    _add_filter_flags(p)
    _add_settings(p, "search")

    p = sub.add_parser("init", help="write the MCP configuration of Claude Desktop, Cursor, "
                                    "VS Code and Claude Code for a folder (or print it)")
    p.add_argument("dir", nargs="?", help="folder of documents (default: WATCH_DIR, or asked)")
    p.add_argument("--print", action="store_true",
                   help="print the configuration instead of writing it")
    _add_client_flags(p)
    p.add_argument("--name", help="the server's name in the clients (default: the folder's)")
    p.add_argument("--index", metavar="FILE",
                   help="the index file (default: the folder's own index, the one "
                        "`pocketmcp index FOLDER` makes)")
    p.add_argument("--title", default="pocketmcp", help="the server's title (--title of serve)")
    _add_settings(p, "init")

    p = sub.add_parser("doctor", help="check a folder's index, its lock, the model or "
                                      "provider, a running server and the clients' entries; "
                                      "say what to fix",
                       description="Check a folder's index, its lock, the model or provider, "
                                   "a running server and each client entry (with the entry's "
                                   "own folder and index). Exit code 0 when all is well, 1 "
                                   "when something FAILs (each FAIL says the command that "
                                   "fixes it).")
    _add_folder(p, "the folder whose index to check (default: the current directory's "
                   "index, or the only one)")
    _add_client_flags(p)
    _add_settings(p, "doctor")

    for name, help_text in (
        ("export", "write every document, chunk and vector of the index to FILE (JSON Lines)"),
        ("import", "add the documents of an export FILE to the index (vectors reused when "
                   "the model matches)"),
        ("backup", "copy the index to FILE, consistently, even while a server writes it"),
    ):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("file", metavar="FILE")
        _add_folder(p)
        p.add_argument("--json", action="store_true", help="print the summary as JSON")
        _add_settings(p, name)
    return parser


FOLDER_HELP = ("the folder whose index this acts on, as `pocketmcp index FOLDER` made it "
               "(default: WATCH_DIR, else the current directory's index, or the only one)")


def _add_folder(parser: argparse.ArgumentParser, help_text: str = FOLDER_HELP) -> None:
    """The folder, named the same way by every command that acts on a folder's index."""
    parser.add_argument("dir", nargs="?", metavar="FOLDER", help=help_text)


def _add_log_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="print every log line (JSON) on a terminal too; by default a "
                             "terminal shows the progress and a count of the warnings after "
                             "it (elsewhere the log lines are printed as they come)")
    parser.add_argument("--log-file", metavar="FILE",
                        help="write every log line (JSON) to FILE")


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


def _add_client_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--client", action="append",
                        choices=("claude-desktop", "cursor", "vscode", "claude-code"),
                        help="only this client (repeat for several; default: all four)")
    parser.add_argument("--config-file", metavar="FILE",
                        help="the client's configuration file, instead of its usual place "
                             "(with one --client)")


def _add_serve_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--exts", metavar="EXT,EXT",
                        help="file extensions to index, e.g. md,txt (sets INCLUDE_GLOBS)")
    parser.add_argument("--title", default="pocketmcp",
                        help="the server's name as clients show it (default: pocketmcp)")
    parser.add_argument("--inst", metavar="TEXT",
                        help="instructions sent to the client (default: how to use the tools)")


def _config(args: argparse.Namespace) -> Config:
    overrides = {e.setting.env: getattr(args, e.setting.env, None) for e in declarations()}
    if getattr(args, "dir", None):
        overrides["WATCH_DIR"] = os.path.abspath(os.path.expanduser(args.dir))
    if getattr(args, "exts", None):
        exts = [e.strip().lstrip("*.").strip() for e in args.exts.split(",")]
        overrides["INCLUDE_GLOBS"] = ",".join(f"**/*.{e}" for e in exts if e)
    from pocketmcp.commands.choosing import choose  # which index a command means

    config, args.indexes_seen = choose(load(overrides), args.command)
    return config


def _commands(parser: argparse.ArgumentParser) -> set[str]:
    """The command names `parser` knows (argparse keeps them on its subparsers action)."""
    return {name for action in parser._actions
            if isinstance(action, argparse._SubParsersAction) for name in action.choices}


def with_command(parser: argparse.ArgumentParser, argv: Sequence[str]) -> list[str]:
    """`argv` with `serve` put first when it names no command: what editors launch is
    `pocketmcp` with flags only, or with a folder (`pocketmcp FOLDER`)."""
    argv = list(argv)
    if not argv or (argv[0].startswith("-") and argv[0] not in ("-h", "--help", "--version")) or (
            argv[0] not in _commands(parser) and os.path.isdir(argv[0])):
        argv.insert(0, "serve")
    return argv


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(with_command(parser, sys.argv[1:] if argv is None else argv))
    where: str | None = None  # the index, named by a DISK_FULL message
    try:
        config = _config(args)
        logs.configure(config.log_level)
        for name in (name for name in REMOVED if name in os.environ):
            logs.get("pocketmcp.cli").warning(
                "setting_removed", variable=name,
                instead="docs/changelog.md (2026-11-28) says what replaces it")
        where = config.main_place().describe()
        # Each command imports its own modules here: `index` does not pay for the MCP server,
        # nor `--help` for anything. `serve` on stdio imports the MCP SDK in a worker thread
        # while the runtime starts (mcp/host.py).
        if args.command in ("index", "watch"):
            from pocketmcp.commands import indexing

            if args.command == "index":
                from pocketmcp.commands.progress import held_logs

                with held_logs(args, config.log_level, tty=sys.stderr.isatty()):
                    code = anyio.run(indexing.index, config, args, backend="asyncio")
                return code if argv is not None else _exit_now(code)
            return anyio.run(indexing.watch, config, backend="asyncio")
        if args.command == "search":
            from pocketmcp.commands import searching

            return anyio.run(searching.run, config, args, backend="asyncio")
        if args.command == "open":
            from pocketmcp.commands import web

            return anyio.run(web.login_link, config, args, backend="asyncio")
        if args.command == "init":
            from pocketmcp.commands import setup

            return setup.init(config, args)
        if args.command == "doctor":
            from pocketmcp.commands.doctor import doctor

            return anyio.run(doctor, config, args, backend="asyncio")
        if args.command == "eval":
            from pocketmcp.commands import evaluating

            return anyio.run(evaluating.run, config, args, backend="asyncio")
        if args.command == "check-search":
            from pocketmcp.commands import evaluating

            return anyio.run(evaluating.check_search, config, args, backend="asyncio")
        if args.command in ("export", "import", "backup"):
            from pocketmcp.commands import archiving

            run = {"export": archiving.export, "import": archiving.restore,
                   "backup": archiving.backup}[args.command]
            return anyio.run(run, config, args, backend="asyncio")
        if args.command == "serve":
            # The cyclic garbage collector waits while the server starts (mcp/collector.py)
            gc.disable()
            try:
                from pocketmcp.mcp.serve import serve

                return anyio.run(serve, config, args.title, args.inst, backend="asyncio")
            finally:
                gc.enable()
    except BaseExceptionGroup as group:
        return _failed(single(group), where)
    except Exception as exc:  # the one place that catches everything: report, exit non-zero
        return _failed(exc, where)
    except KeyboardInterrupt:
        return 130
    parser.error(f"unknown command {args.command}")
    return 2


def _exit_now(code: int) -> NoReturn:
    """End the process with `code` now that `index` has closed and flushed everything (the
    index checkpointed, its lock released, the summary printed): the interpreter's teardown,
    which frees the model and every module one object at a time (most of a second on two
    busy cores), is skipped. Only from the command line: a caller of `main` gets the code."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _failed(exc: BaseException, where: str | None) -> int:
    if isinstance(exc, KeyboardInterrupt):
        return 130
    if isinstance(exc, BrokenPipeError):  # the reader went away (`| head`): nothing to say
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    full = disk_full(exc, where)
    if full is not None:
        print(f"pocketmcp: {full.code}: {full}", file=sys.stderr)  # noqa: T201
        return 1
    if isinstance(exc, PocketError):  # its code first, unless it has none of its own
        code = "" if exc.code == PocketError.code else f"{exc.code}: "
        print(f"pocketmcp: {code}{exc}", file=sys.stderr)  # noqa: T201
        return 1
    if isinstance(exc, Exception):
        logs.get("pocketmcp").error("crashed", error=repr(exc), exc_info=exc)
        return 1
    raise exc
