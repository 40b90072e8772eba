"""The seam between the index's users and its stores: what reading and writing an index
means, whichever engine holds it (SQLite files, or Postgres with pgvector).

Where an index lives is a `Place` (a SQLite file, or a Postgres schema): the one object that
knows which store holds it, so nothing outside store/ asks. Ops and the pipeline read through
a `ReadIndex` (its `run` hands a `Reader` to a function in a worker thread; the function asks
for the capabilities it uses: `Listing`, `Passages`, `Waiting` and so on); only the writer
actor (pipeline/writer.py) holds a `StoreWriter`. Both stores answer with the same rows
(rows.py), much of them from the same SQL (reads.py), so every tool returns the same shapes
on either.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Protocol, TypeVar

import anyio
import numpy as np
import numpy.typing as npt

from pocketmcp.core.identity import Identity
from pocketmcp.messages import Chunk, DocRecord, Removed, Written
from pocketmcp.store.archive import StoredDoc
from pocketmcp.store.filters import DocFilter
from pocketmcp.store.folder import FolderRecord
from pocketmcp.store.related import MAX_INCOMING, Linker, LinkRow
from pocketmcp.store.rows import (
    ChunkRow,
    DocState,
    DocumentRow,
    HitRow,
    Keywords,
    Sort,
    Spot,
    WaitingDoc,
)

T = TypeVar("T")
I64 = npt.NDArray[np.int64]
F32 = npt.NDArray[np.float32]
Vectors = tuple[I64, I64, F32]  # chunk ids, doc ids, float32 vectors (n, dim)
Found = tuple[I64, F32, I64]  # chunk ids, cosines, doc ids; best first


class Overview(Protocol):
    """The index as a whole."""

    def snapshot(self) -> AbstractContextManager[None]:
        """One read transaction: every read inside sees the same committed state."""
    def identity(self) -> Identity | None: ...
    def scan_done(self) -> bool:
        """Whether the index's writer has finished its first scan of the folder."""
    def counts(self) -> dict[str, int]: ...


class Known(Protocol):
    """What the index holds of each document by external id (what files are checked
    against)."""

    def doc_state(self, external_id: str) -> DocState | None: ...
    def external_ids(self, prefix: str, after: str = "", limit: int = 500) -> list[str]: ...


class Listing(Protocol):
    """Documents as listings, filters and reading tools see them."""

    def documents_page(self, where: DocFilter, limit: int, *, sort: Sort = "doc_id",
                       after: tuple[str, int] | None = None) -> list[DocumentRow]: ...
    def doc_ids_where(self, where: DocFilter) -> list[int]: ...
    def libraries(self) -> list[tuple[str, int, int]]: ...
    def document(self, doc_id: int) -> DocumentRow | None: ...
    def document_by_external(self, external_id: str) -> DocumentRow | None: ...
    def content(self, doc_id: int) -> str | None: ...
    def all_external_ids(self) -> list[tuple[int, str]]: ...


class Passages(Protocol):
    """Chunks as search results show them."""

    def hits(self, chunk_ids: Sequence[int]) -> dict[int, HitRow]: ...
    def neighbours(self, doc_id: int, first: int,
                   last: int) -> list[tuple[int, int, int, str]]: ...
    def chunk(self, chunk_id: int) -> ChunkRow | None: ...
    def opening_chunks(self, doc_ids: Sequence[int]) -> list[int]: ...
    def chunk_sizes(self, doc_id: int, first: int,
                    last: int) -> list[tuple[int, int, int, int]]: ...
    def excerpt(self, doc_id: int, start: int, end: int) -> str | None: ...
    def spots(self, chunk_ids: Sequence[int]) -> dict[int, Spot]: ...
    def spot(self, doc_id: int, first: int, last: int) -> Spot | None: ...


class KeywordSearch(Protocol):
    def keyword_stage(self, query: str, depth: int, allowed: Sequence[int] | None, *,
                      title_weight: float, total: int, documents: bool,
                      alone: bool = False, best_chunks: bool = False) -> Keywords:
        """Best chunks for the query's words; with `documents`, best documents by BM25 over
        the whole document; with `best_chunks`, documents by their best chunk's BM25 (a
        store whose chunk scores are that BM25 may leave it to the fusion)."""


class StoredVectors(Protocol):
    def vectors_for(self, text_shas: Iterable[str]) -> dict[str, bytes]:
        """The stored vector of each chunk text among these digests the index holds."""
    def vectors_by_ids(self, ids: Sequence[int], dim: int) -> Vectors: ...


class Waiting(Protocol):
    """Chunks written for keyword search whose vectors have not come yet."""

    def embed_backlog(self, limit: int, skip: Sequence[int] = ()) -> list[WaitingDoc]:
        """Documents whose chunks wait for vectors, most recently changed first."""
    def waiting_count(self) -> int:
        """How many chunks wait for their vectors (an indexed count)."""
    def waiting_among(self, chunk_ids: Sequence[int]) -> set[int]:
        """Which of these chunks wait for their vectors."""


class Links(Protocol):
    def outgoing_links(self, doc_id: int) -> list[LinkRow]:
        """A document's links in the order written, each with the documents it resolves
        to."""
    def incoming_links(self, doc_id: int, limit: int = MAX_INCOMING) -> list[Linker]:
        """Documents that link to this one (itself left out), by doc_id."""


class Archive(Protocol):
    def snapshot(self) -> AbstractContextManager[None]: ...
    def stored_documents(self) -> Iterator[StoredDoc]:
        """Every document in doc_id order, with what writing it again needs (call inside
        `snapshot()`)."""


class Reader(Overview, Known, Listing, Passages, KeywordSearch, StoredVectors, Waiting, Links,
             Archive, Protocol):
    """One read connection (blocking; one caller at a time), with every capability above;
    a function a `ReadIndex` runs asks for the ones it uses. Readers never block writers."""


class View(Protocol):
    """Read connections handed to blocking functions in worker threads."""

    async def run(self, fn: Callable[[Reader], T]) -> T: ...
    def close(self) -> None: ...


class ReadIndex(Protocol):
    """One index as searches and listings see it."""

    dim: int
    root: Path | None  # the watched folder its `file:` documents are in, if any

    @property
    def where(self) -> str:
        """Where the index is, for messages (a file, or a Postgres schema; no password)."""

    def beside(self, name: str) -> Path:
        """A file of this index's own on this machine (its place's `beside`)."""

    @property
    def live(self) -> int:
        """About how many chunks it holds (sizes the vector search's candidate pool)."""

    @property
    def vectors_from(self) -> str:
        """What answers vector searches, for the start-up log line."""

    async def run(self, fn: Callable[[Reader], T]) -> T:
        """`fn(reader)` on a free read connection, in a worker thread."""

    async def made(self, stopping: anyio.Event) -> Identity | None:
        """Wait until a writer has made the index: what it records; None once stopping."""

    async def open_vectors(self) -> None:
        """Get ready for vector searches."""

    def nearest(self, reader: Reader, query: F32, k: int, candidates: int,
                allowed: Sequence[int] | None) -> Found:
        """The k chunks nearest `query` by cosine, among `allowed` documents when given
        (blocking; on `reader`'s thread)."""

    def mean_cosines(self, reader: Reader, query: F32, doc_ids: Sequence[int]
                     ) -> dict[int, float]:
        """Each document's mean cosine to `query` over all its chunks with vectors (blocking;
        on `reader`'s thread); documents with none are left out."""

    def close(self) -> None: ...


class StoreWriter(Protocol):
    """The writing side, used by the writer actor alone (blocking, one thread at a time)."""

    @property
    def where(self) -> str: ...

    @property
    def commits(self) -> int: ...

    @property
    def wants_repair(self) -> bool:
        """Whether derived data (SQLite's vector file) needs a background repair."""

    def batch(self, work: Callable[[], T], keys: Sequence[str]) -> T:
        """`work()` in one transaction, committed; documents `keys` (external ids) are locked
        against other writers first, in sorted order. A store that can lose a transaction to
        a concurrent one (a serialization failure, a deadlock, a dropped connection) runs
        `work` again, so it must start from nothing each time."""

    def item(self) -> AbstractContextManager[None]:
        """A savepoint: an error inside undoes this item only."""

    def keep_removed(self, seconds: float, most: int) -> None:
        """Keep the vectors of removed chunks (by text digest) `seconds` at most, the newest
        `most` at most, for text that comes back; 0: none (the default)."""
    def record_scan(self, state: str) -> None:
        """Record how far the first scan has come ("running" or "done") for readers."""
    def record_folder(self, folder: FolderRecord) -> None:
        """Record the folder the index is fed from (outside a batch: committed at once)."""
    def upsert(self, doc: DocRecord, chunks: Sequence[Chunk], vectors: bytes | None, *,
               rank: int = 0) -> Written:
        """Insert or replace a document with its chunks (unchanged text keeps them). Without
        `vectors` the chunks are written for keyword search and wait for their vectors,
        queued at `rank` (higher first)."""
    def add_vectors(self, doc_id: int, sha256: str, chunks: Sequence[Chunk],
                    vectors: bytes) -> bool:
        """The vectors of a document's waiting chunks, for its text `sha256`; False (nothing
        written) when it changed since, is gone, or has them already."""
    def touch(self, external_id: str, size: int, mtime_ns: int) -> None: ...
    def delete(self, external_id: str) -> tuple[int, int] | None: ...
    def remove(self, doc_ids: Sequence[int], external_ids: Sequence[str]) -> Removed: ...
    def view(self) -> View:
        """A small reader of the same index (what the pipeline checks files against)."""

    def repair_vectors(self) -> None: ...
    def stop_repair(self) -> None: ...
    def close(self) -> None: ...


class Place(Protocol):
    """Where one index lives, and everything that depends on which store holds it. Naming a
    place touches nothing; the blocking methods open what they need and close it."""

    def describe(self) -> str:
        """Where it is, for messages and logs (a file, or a Postgres schema; no password)."""

    def beside(self, name: str) -> Path:
        """The file `name` of this index's own on this machine, in the folder that holds its
        token (`token`), discovery file (`server.json`), server lock and log, OCR cache
        (`ocr`) and search tuning (`search.json`): beside a SQLite index's file, or a folder
        of the user data folder for a Postgres schema (made, private, when first named)."""

    def own_files(self) -> list[Path]:
        """The files and folders of this index's own on this machine that exist (the
        database and those beside it), for checking that no one else may read them
        (blocking)."""

    def exists(self) -> bool:
        """Whether a writer has made the index here (blocking)."""

    def identity(self) -> Identity | None:
        """What the index records of its embeddings; None when there is none yet
        (blocking)."""

    def folder(self) -> FolderRecord | None:
        """The folder the index records it indexes; None when it records none (blocking)."""

    def reader(self, dim: int, *, root: Path | None = None) -> ReadIndex:
        """The index for searching and listing (`root`: the folder its `file:` documents
        are in)."""

    def writer(self, identity: Identity, *, rebuild: bool = False) -> StoreWriter:
        """THE writer of the index, made if missing (blocking: it migrates the schema and
        takes the writer lock). WriterBusyError while another process holds the lock;
        ModelMismatchError when the index was built with other embeddings."""

    def writer_held(self) -> bool:
        """Whether another process holds the writer lock now (blocking, instant). A store
        that takes several writers at once (Postgres) never says so."""

    def size(self) -> int:
        """Bytes the index takes on this machine (0 where a server holds it; blocking)."""

    def holds(self, path: Path) -> bool:
        """Whether `path` is one of the index's own files, there or to come (none an export or
        a backup may write over)."""

    def backup(self, target: Path) -> int:
        """A consistent copy of the index at `target`, made while its writer writes; its
        size in bytes (blocking). NotSupported where the store has its own backups."""

    def drop(self) -> None:
        """Remove the index with everything in it (blocking; throwaway indexes)."""

    def database(self, name: str) -> Place:
        """The place of named database `name` (a checked name) beside this index."""

    def throwaway(self, folder: Path, file: Path | None = None) -> Place:
        """A place for a short-lived index of this store (eval's): a file in `folder` (or
        `file` when given), or a fresh schema beside this one; `drop` removes it."""
