"""What the ops read of the settings: for ingest_file and ingest_url, where a file may come
from and the bounds of what is read."""

from __future__ import annotations

from pathlib import Path

import msgspec

from pocketmcp.pipeline.settings import Watched


class IngestSettings(msgspec.Struct, frozen=True, kw_only=True):
    watched: Watched  # its files are the watcher's documents, in their libraries
    allowed_roots: tuple[Path, ...]  # ALLOWED_ROOTS, `~` expanded
    max_file_bytes: int  # MAX_FILE_MB in bytes
    url_timeout_s: int

    def roots(self) -> tuple[Path, ...]:
        """Folders ingest_file may read: WATCH_DIR and ALLOWED_ROOTS, symlinks resolved
        (blocking)."""
        return tuple(p.resolve() for p in (self.watched.root, *self.allowed_roots))
