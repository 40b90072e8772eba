"""After `pocketmcp index` is interrupted: which files of the folder the index does not hold
as they are now (new, changed, or abandoned mid-way), so the summary can name them. The next
run indexes exactly these."""

from __future__ import annotations

import os
import time

from pocketmcp.config import Config
from pocketmcp.core.paths import watched_id
from pocketmcp.pipeline.watcher import Folder, path_filter
from pocketmcp.store.api import Known

MAX_LISTED = 200  # files named in the summary at most
BUDGET_S = 2.0  # time spent looking at most: an interrupted run ends promptly


async def unfinished(config: Config, dim: int, skipped: set[str]) -> tuple[list[str], bool]:
    """(files not indexed as they are now, up to MAX_LISTED; whether the list was cut, by
    count or by time). `skipped`: files the run refused on purpose."""
    folder = Folder(config.watched.root, path_filter(config.watched))
    index = config.main_place().reader(dim, root=config.watched.root)
    found: list[str] = []
    cut = False
    deadline = time.monotonic() + BUDGET_S

    def look(reader: Known) -> None:
        nonlocal cut
        stack = [""]
        while stack:
            files, dirs = folder.list_dir(stack.pop(), quiet=True)
            stack.extend(dirs)
            for rel in files:
                if time.monotonic() > deadline or len(found) >= MAX_LISTED:
                    cut = True
                    return
                if rel in skipped:
                    continue
                try:
                    st = os.stat(folder.real / rel)
                except OSError:
                    continue
                state = reader.doc_state(watched_id(rel))
                if state is None or (state.size, state.mtime_ns) != (st.st_size,
                                                                      st.st_mtime_ns):
                    found.append(rel)

    try:
        await index.run(look)
    finally:
        index.close()
    return sorted(found), cut
