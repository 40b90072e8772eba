"""The source: an initial scan of the folder, reconciliation with the index, then watching."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from functools import partial
from pathlib import Path

import anyio
import watchfiles
from anyio.streams.memory import MemoryObjectSendStream

from pocketmcp import logs
from pocketmcp.core.paths import PathFilter, rel_of, watched_id
from pocketmcp.core.safe import is_clean_name, safe_text
from pocketmcp.messages import Event, FileGone, FileSeen, ScanDone
from pocketmcp.pipeline.settings import Watched
from pocketmcp.pipeline.state import Stats
from pocketmcp.store.api import Known, View

log = logs.get("pocketmcp.watcher")


def path_filter(watched: Watched) -> PathFilter:
    """Which files of WATCH_DIR are documents: INCLUDE_GLOBS minus the ignore patterns and
    the folder's .gitignore (blocking: reads that file)."""
    try:
        gitignore = (watched.root / ".gitignore").read_text(
            encoding="utf-8", errors="replace").splitlines()
    except OSError:
        gitignore = []
    return PathFilter(watched.include, watched.ignore, gitignore)


class Folder:
    """The watched folder: relative paths, symlink checks and listing. Blocking methods."""

    def __init__(self, root: Path, paths: PathFilter) -> None:
        self.root = root
        self.real = Path(os.path.realpath(root))
        self.paths = paths

    def rel(self, path: str | Path) -> str | None:
        """The POSIX path of `path` inside the folder, or None when it leads outside."""
        path = Path(path)
        try:
            rel = path.relative_to(self.root)
        except ValueError:
            try:
                rel = path.relative_to(self.real)
            except ValueError:
                return None
        if rel.parts in ((), (".",)) or ".." in rel.parts or not is_clean_name(str(rel)):
            return None
        # Every folder on the way must be a real folder inside the root, not a link out.
        parent = os.path.realpath(self.real / rel.parent)
        if parent != str(self.real / rel.parent):
            return None
        return rel.as_posix()

    def inside(self, rel: str) -> bool:
        """True when `rel` (a file or a link to one) resolves inside the folder."""
        target = os.path.realpath(self.real / rel)
        return target == str(self.real) or target.startswith(str(self.real) + os.sep)

    def list_dir(self, rel_dir: str, *, quiet: bool = False) -> tuple[list[str], list[str]]:
        """(wanted files, folders to descend) directly under `rel_dir`, sorted; `quiet`: no
        warnings (a count before the scan, which warns itself)."""
        base = self.real / rel_dir if rel_dir else self.real
        files: list[str] = []
        dirs: list[str] = []
        try:
            with os.scandir(base) as entries:
                for entry in entries:
                    rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
                    if not is_clean_name(entry.name):
                        if not quiet:
                                log.warning("skipped", path=safe_text(rel), reason="the name is "
                                        "not valid UTF-8; rename it to index it")
                        continue
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            if self.paths.wants_dir(rel):
                                dirs.append(rel)
                        elif entry.is_file() and self.paths.wants_file(rel) and (
                            not entry.is_symlink() or self.inside(rel)
                        ):
                            files.append(rel)
                    except OSError:
                        continue
        except OSError as exc:
            if not quiet:
                log.warning("folder_unreadable", path=str(base), error=str(exc))
        return sorted(files), sorted(dirs)

    def count(self) -> int:
        """How many files a scan will see now (blocking: lists every folder, reads none)."""
        total, stack = 0, [""]
        while stack:
            files, dirs = self.list_dir(stack.pop(), quiet=True)
            total += len(files)
            stack.extend(dirs)
        return total

    def is_wanted_file(self, rel: str) -> bool:
        if not self.paths.wants_file(rel):
            return False
        try:
            st = os.stat(self.real / rel)
        except OSError:
            return False
        return stat.S_ISREG(st.st_mode) and self.inside(rel)


Only = Callable[[str], bool]


async def _walk(folder: Folder, outbox: MemoryObjectSendStream[Event], start: str,
                stats: Stats | None, stop: anyio.Event, *, force: bool = False,
                only: Only | None = None) -> int:
    count = 0
    stack = [start]
    while stack and not stop.is_set():
        rel_dir = stack.pop()
        files, dirs = await anyio.to_thread.run_sync(folder.list_dir, rel_dir)
        stack.extend(reversed(dirs))
        for rel in files:
            if only is not None and not only(rel):
                continue
            await outbox.send(FileSeen(rel, force))
            count += 1
            if stats is not None:
                stats.seen += 1
    return count


def _page(prefix: str, after: str, reader: Known) -> list[str]:
    return reader.external_ids(prefix, after)


async def _reconcile(folder: Folder, outbox: MemoryObjectSendStream[Event], view: View,
                     prefix: str, stop: anyio.Event, only: Only | None = None) -> None:
    """FileGone for each indexed file under `prefix` that is no longer a wanted file."""
    after = ""
    while not stop.is_set():
        page = await view.run(partial(_page, watched_id(prefix), after))
        if not page:
            return
        after = page[-1]
        rels = [rel for rel in map(rel_of, page) if only is None or only(rel)]
        # A page's files looked at in one worker-thread step, not one step each.
        for rel in await anyio.to_thread.run_sync(_unwanted, folder, rels):
            await outbox.send(FileGone(rel))


def _unwanted(folder: Folder, rels: list[str]) -> list[str]:
    """Those of `rels` that are no longer wanted files (blocking)."""
    return [rel for rel in rels if not folder.is_wanted_file(rel)]


async def scan_folder(
    outbox: MemoryObjectSendStream[Event], *, folder: Folder, view: View, stats: Stats,
    stop: anyio.Event, force: bool = False, only: Only | None = None, token: int = 0,
) -> None:
    """One pass: every wanted file, then every indexed file that went away, then ScanDone."""
    async with outbox:
        files = await _walk(folder, outbox, "", stats, stop, force=force, only=only)
        await _reconcile(folder, outbox, view, "", stop, only)
        await outbox.send(ScanDone(files, token))


async def watch_folder(
    outbox: MemoryObjectSendStream[Event], *, folder: Folder, view: View, stats: Stats,
    stop: anyio.Event, debounce_ms: int,
) -> None:
    """Follow changes until `stop` is set, scanning once the watch is in place.

    The scan starts only after the OS watch exists, so no change can fall between the two:
    a file changed during the scan is seen twice, which costs one stat.
    """
    async with outbox, anyio.create_task_group() as tg:
        watching = anyio.Event()
        tg.start_soon(_follow, outbox.clone(), folder, view, stop, debounce_ms, watching,
                      name="pocketmcp.watcher.follow")
        await watching.wait()
        await scan_folder(outbox.clone(), folder=folder, view=view, stats=stats, stop=stop)


def _classify(folder: Folder, changes: set[tuple[watchfiles.Change, str]]
              ) -> tuple[list[str], list[tuple[str, bool]]]:
    """(files to look at, (folders to rescan or reconcile, whether they exist)), sorted.

    Events come as an unordered set: what counts is each path's state now (blocking).
    """
    wanted: set[str] = set()
    folders: dict[str, bool] = {}
    for _change, path in changes:
        rel = folder.rel(path)
        if rel is None:
            continue
        full = folder.real / rel
        if full.is_dir() and not full.is_symlink():
            if folder.paths.wants_dir(rel):
                folders[rel] = True
        elif folder.paths.wants_file(rel):
            wanted.add(rel)
        else:
            # Possibly a folder that was removed or moved away: its indexed files.
            folders[rel] = False
    return sorted(wanted), sorted(folders.items())


# How long the OS watcher waits before reporting "no change"; the first such report proves
# the watch is in place.
_WATCH_TIMEOUT_MS = 100


async def _follow(outbox: MemoryObjectSendStream[Event], folder: Folder, view: View,
                  stop: anyio.Event, debounce_ms: int, watching: anyio.Event) -> None:
    try:
        async with outbox:
            async for changes in watchfiles.awatch(
                folder.real, debounce=max(debounce_ms, 1), step=50, stop_event=stop,
                recursive=True, watch_filter=None, ignore_permission_denied=True,
                rust_timeout=_WATCH_TIMEOUT_MS, yield_on_timeout=True,
            ):
                watching.set()
                if not changes:
                    continue
                wanted, folders = await anyio.to_thread.run_sync(_classify, folder, changes)
                for rel in wanted:
                    await outbox.send(FileSeen(rel))
                for rel, is_dir in folders:
                    if is_dir:
                        # A new or changed folder: files created in it may have no events.
                        await _walk(folder, outbox, rel, None, stop)
                    await _reconcile(folder, outbox, view, rel + "/", stop)
    finally:
        watching.set()  # also when stopped before the watch was in place: the scan must not wait
