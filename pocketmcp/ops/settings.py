"""What the ops read of the settings: for ingest_file and ingest_url, where a file may come
from and the bounds of what is read."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import msgspec

from pocketmcp.pipeline.settings import Watched
from pocketmcp.settings import Setting


class IngestSettings(msgspec.Struct, frozen=True, kw_only=True):
    watched: Watched  # its files are the watcher's documents, in their libraries
    allowed_roots: Annotated[tuple[Path, ...], Setting("ALLOWED_ROOTS", used_by=("serve",),
        help="Comma-separated folders ingest_file may read, besides WATCH_DIR.")] = ()
    max_file_bytes: int = 20 * 2**20  # MAX_FILE_MB's (config.load)
    url_timeout_s: int = 30  # time limit of one ingest_url download

    def roots(self) -> tuple[Path, ...]:
        """Folders ingest_file may read: WATCH_DIR and ALLOWED_ROOTS, symlinks resolved
        (blocking)."""
        return tuple(p.resolve() for p in (self.watched.root, *self.allowed_roots))
