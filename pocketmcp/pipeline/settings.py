"""What the pipeline reads of the settings: the watched folder and the bounds of its stages."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Annotated, ClassVar

import msgspec

from pocketmcp.settings import FEEDING, WRITING, Setting
from pocketmcp.store.folder import FolderRecord

INCLUDE = ("**/*.md", "**/*.markdown", "**/*.txt", "**/*.rst", "**/*.pdf", "**/*.docx",
           "**/*.html", "**/*.htm", "**/*.pptx", "**/*.xlsx", "**/*.epub", "**/*.csv",
           "**/*.png", "**/*.jpg", "**/*.jpeg", "**/*.webp", "**/*.tif", "**/*.tiff", "**/*.bmp",
           "**/*.gif")


class Watched(msgspec.Struct, frozen=True, kw_only=True):
    """The watched folder: where it is, which of its files are documents, their libraries."""

    USED_BY: ClassVar = ("index", "watch", "serve", "doctor", "eval")  # they list the folder
    root: Annotated[Path, Setting("WATCH_DIR", flag="--data-folder",
        used_by=("index", "watch", "serve", "search", "open", "doctor", "init"),
        help="Folder of documents to index and watch.")] = Path("kb")
    include: Annotated[tuple[str, ...], Setting("INCLUDE_GLOBS", flag="--include",
        help="Comma-separated gitignore-style globs of files to index. PDF, Word, HTML, "
             "PowerPoint, Excel, EPUB and CSV files are converted to Markdown, images read by "
             "OCR (see OCR), other files as text (binary ones are skipped and "
             "logged).")] = INCLUDE
    ignore: Annotated[tuple[str, ...], Setting("IGNORE_PATTERNS", flag="--ignore",
        help="Comma-separated gitignore-style patterns to skip, on top of temp/editor files, "
             "dot files and the folder's .gitignore.")] = ()
    library: Annotated[str, Setting("LIBRARY", flag="--libraries", used_by=WRITING,
        help="folder: a watched file's top folder names its library (kb/papers/a.pdf is in "
             "'papers'); files directly in WATCH_DIR, and documents naming none, are in "
             "'default'. Any other name: the library of all of them.")] = "folder"
    given: bool = False  # WATCH_DIR (or a folder) was given: else its default

    @property
    def library_from(self) -> str:
        """How watched files fall into libraries: by their top folder, or none."""
        return "folder" if self.library == "folder" else "none"

    @property
    def default_library(self) -> str:
        """The library of documents that name none."""
        return "default" if self.library == "folder" else self.library

    def library_of(self, rel: str) -> str:
        """The library of the watched file at `rel` (POSIX, relative to WATCH_DIR)."""
        if self.library_from == "folder" and "/" in rel:
            return rel.split("/", 1)[0]
        return self.default_library


class PipelineSettings(msgspec.Struct, frozen=True, kw_only=True):
    USED_BY: ClassVar = FEEDING
    watched: Watched
    max_file_mb: Annotated[int, Setting("MAX_FILE_MB", minimum=1, maximum=4096,
        help="Files larger than this many MiB are skipped and logged.")] = 20
    chunk_size: Annotated[int, Setting("CHUNK_SIZE", minimum=100, maximum=20000,
        help="Target chunk length in characters (chunks never exceed the model's token "
             "window); neighbouring chunks share 12% of it.")] = 1000
    debounce_ms: Annotated[int, Setting("DEBOUNCE_MS", minimum=0, maximum=60000,
        used_by=("watch", "serve"),
        help="Quiet time before a burst of file events is processed.")] = 600
    read_concurrency: Annotated[int, Setting("READ_CONCURRENCY", minimum=1, maximum=64,
        help="Files read and hashed at once.")] = 3
    queue_size: Annotated[int, Setting("QUEUE_SIZE", minimum=0, maximum=16,
        help="Capacity of each stream between pipeline stages.")] = 8
    cpu_budget: Annotated[int, Setting("INDEX_CPU_BUDGET", minimum=0, maximum=100,
        help="Share of the machine's CPU indexing may use, in percent: the model and the OCR "
             "worker get that share of the cores as threads (at least one), and indexing "
             "pauses between batches to stay under it. 0: no pauses, priority alone; the "
             "model a thread per core but one (at least two), OCR one fewer than the "
             "cores.")] = 0
    # Constants: the environment does not set them.
    # Vectors of removed chunks are kept this long, by their text, for text that comes back
    # (a file restored or moved, a section pasted elsewhere), this many at most (about 80 MB
    # at 384 dimensions), the newest: store/writes.py.
    keep_removed_s: int = 3600
    keep_removed_most: int = 50_000
    max_chunks_per_doc: int = 1000  # a longer document is cut there (time and memory bounded)
    write_batch_files: int = 32  # files committed in one transaction at most

    @property
    def max_file_bytes(self) -> int:
        return self.max_file_mb * 2**20

    @property
    def chunk_overlap(self) -> int:
        """Characters neighbouring chunks share: 12% of CHUNK_SIZE (120 at 1000)."""
        return self.chunk_size * 12 // 100


def folder_record(watched: Watched) -> FolderRecord:
    """What an index fed from `watched` records of it."""
    return FolderRecord(path=str(watched.root.resolve()), library_from=watched.library_from,
                        default_library=watched.default_library, host=socket.gethostname())
