"""How far `pocketmcp index` has got, on stderr: a bar on a terminal, plain lines elsewhere.

The files are counted first (a listing, no reads), so the total is known from the start; the
last report is written when the scan has finished, so a complete run ends at 100%.

On a terminal the log lines are held back (they would tear the bar): the warnings are counted
and summed up after it; `-v` prints every line above the bar, `--log-file FILE` keeps them
all. Elsewhere the log lines go to stderr as they come, JSON, as from every command.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any, Literal

import anyio

from pocketmcp import logs
from pocketmcp.config import Config
from pocketmcp.errors import PocketError
from pocketmcp.pipeline.state import Stats
from pocketmcp.pipeline.watcher import Folder, path_filter
from pocketmcp.runtime import Runtime

Style = Literal["bar", "lines"]
LINE_EVERY_S = 10.0  # plain lines: one this often, and one at the end
BAR_EVERY_S = 0.25


def style_of(choice: str, *, tty: bool) -> Style | None:
    """--progress auto|bar|lines|off (and `on`, the bar) as a style, or None for none."""
    if choice == "auto":
        return "bar" if tty else "lines"
    if choice in ("on", "bar"):
        return "bar"
    return "lines" if choice == "lines" else None


def count_files(config: Config) -> int:
    """How many files the scan of WATCH_DIR will see (blocking)."""
    return Folder(config.watched.root, path_filter(config.watched)).count()


def line(stats: Stats, total: int, seconds: float) -> str:
    done = stats.processed
    share = 100 if total == 0 else min(100, done * 100 // total)
    removed = f", {stats.removed} removed" if stats.removed else ""
    return (f"pocketmcp: indexed {done}/{total} files ({share}%){removed}, chunks: "
            f"{stats.chunks_written} keyword-indexed, {stats.chunks_vectors} with vectors, "
            f"{seconds:.0f} s")


class Reporter:
    """Progress of one run, written to stderr."""

    def __init__(self, runtime: Runtime, config: Config, style: Style) -> None:
        self.runtime = runtime
        self.config = config
        self.style = style
        self.total: int | None = None
        self.started = time.perf_counter()
        self._bar: Any = None  # a tqdm bar, once the files are counted

    def _stats(self) -> Stats:
        pipeline = self.runtime.feed
        return pipeline.stats if pipeline is not None else Stats()

    def _total(self, stats: Stats) -> int:
        return max(self.total or 0, stats.seen, stats.processed)

    async def run(self) -> None:
        """Report until cancelled; `finish` writes the last report."""
        self.total = await anyio.to_thread.run_sync(count_files, self.config)
        if self.style == "bar":
            from tqdm import tqdm  # only with a bar: kept out of the other commands

            bar = self._bar = tqdm(total=self.total, unit="file", file=sys.stderr,
                                   dynamic_ncols=True)
            while True:
                self._draw(bar)
                await anyio.sleep(BAR_EVERY_S)
        while True:
            await anyio.sleep(LINE_EVERY_S)
            self._print()

    def _draw(self, bar: Any) -> None:
        stats = self._stats()
        bar.total = self._total(stats)
        bar.n = stats.processed
        bar.set_postfix(keywords=stats.chunks_written, vectors=stats.chunks_vectors,
                        removed=stats.removed, refresh=False)
        bar.refresh()

    def _print(self) -> None:
        stats = self._stats()
        print(line(stats, self._total(stats), time.perf_counter() - self.started),  # noqa: T201
              file=sys.stderr, flush=True)

    def finish(self) -> None:
        """The last report: the counts as they ended."""
        if self._bar is not None:
            self._draw(self._bar)
            self._bar.close()
        else:  # plain lines, or a run over before the count was
            self._print()


async def until_fed(runtime: Runtime, config: Config, style: Style | None) -> None:
    """Wait until the runtime's feed has run to its end (a scan), reporting in `style`
    meanwhile (nothing when None); the last report is written before it returns."""
    reporter = Reporter(runtime, config, style) if style else None
    async with anyio.create_task_group() as tg:
        if reporter is not None:
            tg.start_soon(reporter.run, name="pocketmcp.progress")
        await runtime.fed.wait()
        tg.cancel_scope.cancel()
    if reporter is not None:
        reporter.finish()


@contextmanager
def held_logs(args: argparse.Namespace, level: str, *, tty: bool) -> Iterator[None]:
    """The log lines of a run, as the module's docstring says; the summary of warnings is
    printed when the block ends (after the bar)."""
    if not tty and not args.log_file:
        yield  # the JSON lines on stderr, as configured
        return
    try:
        file: IO[str] | None = open(args.log_file, "a", encoding="utf-8") if (  # noqa: SIM115
            args.log_file) else None
    except OSError as exc:
        raise PocketError(f"cannot write the log file {args.log_file}: {exc.strerror}"
                          ) from None
    echo = _to_stderr if not tty else _above_the_bar if args.verbose else None
    held = logs.Held(file, echo)
    logs.configure(level, out=held)  # type: ignore[arg-type]
    try:
        yield
    finally:
        logs.configure(level)
        if file is not None:
            file.close()
        if tty and not args.verbose and held.problems:
            count = sum(n for n, _ in held.problems.values())
            where = (f"every log line is in {args.log_file}" if args.log_file else
                     "-v prints every log line, --log-file FILE keeps them")
            print(f"pocketmcp: {count} warning(s) or error(s) while indexing ({where}):",  # noqa: T201
                  *held.summary(), sep="\n", file=sys.stderr)


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)  # noqa: T201


def _above_the_bar(line: str) -> None:
    from tqdm import tqdm

    tqdm.write(line, file=sys.stderr)


class Rechecked:
    """What `index --force` re-read, for the summary: the files written again with the same
    text (the writer's `rechecked`, among its `updated`) are told as unchanged."""

    @staticmethod
    def line(summary: dict[str, Any]) -> str:
        return (f"  --force: {summary['rechecked']} files re-read and checked, "
                f"{summary['added'] + summary['updated']} changed; "
                f"{summary['chunks_embedded']} chunks re-embedded, "
                f"{summary['chunks_reused']} kept (same text, same vector)\n")
