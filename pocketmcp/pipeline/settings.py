"""What the pipeline reads of the settings: the watched folder and the bounds of its stages."""

from __future__ import annotations

from pathlib import Path

import msgspec

from pocketmcp.store.folder import FolderRecord


class Watched(msgspec.Struct, frozen=True, kw_only=True):
    """The watched folder: where it is, which of its files are documents, their libraries."""

    root: Path  # WATCH_DIR
    include: tuple[str, ...]  # INCLUDE_GLOBS
    ignore: tuple[str, ...]  # IGNORE_PATTERNS (the folder's .gitignore is read as well)
    default_library: str
    library_from: str  # "folder": a file's first folder names its library

    def library_of(self, rel: str) -> str:
        """The library of the watched file at `rel` (POSIX, relative to WATCH_DIR)."""
        if self.library_from == "folder" and "/" in rel:
            return rel.split("/", 1)[0]
        return self.default_library


class PipelineSettings(msgspec.Struct, frozen=True, kw_only=True):
    watched: Watched
    max_file_bytes: int  # MAX_FILE_MB in bytes
    debounce_ms: int
    read_concurrency: int
    queue_size: int  # items each stream between the stages holds
    max_chunks_per_doc: int
    embed_batch_size: int  # the embedder's batching, when it gives none
    embed_batch_tokens: int
    cpu_budget: int = 0  # INDEX_CPU_BUDGET: percent of the machine indexing may use (0: any)


def folder_record(watched: Watched) -> FolderRecord:
    """What an index fed from `watched` records of it."""
    return FolderRecord(path=str(watched.root.resolve()), library_from=watched.library_from,
                        default_library=watched.default_library)
