"""What every store's writer does alike: the statements SQLite and Postgres run the same,
written once in `?` style (an engine's `execute` runs them in its own), and the checks and
times both make. The rest of writing (upserts, keywords, vectors, locking, retries) is the
engine's own."""

from __future__ import annotations

import datetime as dt
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

from pocketmcp.errors import StoreError
from pocketmcp.messages import Removed
from pocketmcp.store.folder import FOLDER_KEY, SCAN_KEY, FolderRecord


def now() -> str:
    """The time a write records (UTC, milliseconds)."""
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def check_vectors(what: str, chunks: int, vectors: bytes, dim: int) -> None:
    """StoreError unless `vectors` holds one float32 vector of `dim` per chunk."""
    if len(vectors) != chunks * dim * 4:
        raise StoreError(f"{what}: {chunks} chunks but {len(vectors)} bytes of vectors "
                         f"(dim {dim})")


PRUNE_EVERY_S = 60.0  # kept vectors past their time go at most this late


def without_successor(old: Sequence[str], new: Sequence[str]) -> list[int]:
    """The positions of a document's old chunks (by text digest) that no chunk of its new
    version carries on: `chunks_removed` counts these, and only their vectors are kept (the
    others are reused at once). Each new chunk carries on one old chunk of its text."""
    left = Counter(new)
    gone: list[int] = []
    for position, sha in enumerate(old):
        if left[sha]:
            left[sha] -= 1
        else:
            gone.append(position)
    return gone


class CommonWrites:
    """The writes both stores make alike (mixed into each engine's writer; inside its
    batches).

    Vectors of removed chunks are kept for a while by text digest (`kept_vectors`): when the
    same text comes back (a file deleted and restored, moved, a section pasted elsewhere) its
    vector is reused instead of embedded again. How long and how many: `keep_removed` (the
    pipeline's settings: an hour, 50,000 at most); none until told."""

    keep_s = 0.0  # kept this long at most (0: none kept)
    keep_most = 0  # and this many at most, the newest
    _kept = 0  # rows kept in the current transaction: the bounds are applied before commit
    _prune_due = 0.0  # time.monotonic() when the bounds are applied again all the same

    def execute(self, sql: str, args: Sequence[Any] = ()) -> Any:
        """Run a statement written in `?` style; its cursor."""
        raise NotImplementedError

    def delete_doc(self, doc_id: int) -> tuple[int, int] | None:
        """Remove a document by doc_id; (doc_id, chunks removed), or None if absent."""
        raise NotImplementedError

    def record(self, key: str, value: str) -> None:
        """Set the meta row `key`."""
        raise NotImplementedError

    def keep_removed(self, seconds: float, most: int) -> None:
        """Keep the vectors of removed chunks `seconds` at most, the newest `most` at most
        (0: none); the next transaction that keeps some applies the bounds."""
        self.keep_s, self.keep_most = float(seconds), int(most)

    def keep_vectors(self, rows: Sequence[tuple[str, Any]]) -> None:
        """Keep (text digest, vector) of chunks going without successor; the engine writes
        the vector in its own type."""
        raise NotImplementedError

    def bound_kept(self) -> None:
        """At the end of each transaction: drop kept vectors older than `keep_s` and the
        oldest beyond `keep_most`, when this one kept some or PRUNE_EVERY_S have passed."""
        if self._kept or time.monotonic() >= self._prune_due:
            self.prune_kept()

    def prune_kept(self) -> None:
        self._kept = 0
        self._prune_due = time.monotonic() + PRUNE_EVERY_S
        self.execute("DELETE FROM kept_vectors WHERE kept_at < ?", (time.time() - self.keep_s,))
        row = self.execute("SELECT count(*) FROM kept_vectors").fetchone()
        over = int(row[0]) - self.keep_most
        if over > 0:
            self.execute("DELETE FROM kept_vectors WHERE text_sha256 IN (SELECT text_sha256 "
                         "FROM kept_vectors ORDER BY kept_at, text_sha256 LIMIT ?)", (over,))

    def record_scan(self, state: str) -> None:
        """Record how far the first scan of the watched folder has come ("running" or
        "done") for read-only processes."""
        self.record(SCAN_KEY, state)

    def record_folder(self, folder: FolderRecord) -> None:
        self.record(FOLDER_KEY, folder.encode())

    def touch(self, external_id: str, size: int, mtime_ns: int) -> None:
        self.execute("UPDATE documents SET size_bytes = ?, mtime_ns = ? WHERE external_id = ?",
                     (size, mtime_ns, external_id))

    def delete(self, external_id: str) -> tuple[int, int] | None:
        """Remove a document by external id; (doc_id, chunks removed), or None if absent."""
        doc_id = self._doc_id_of(external_id)
        return None if doc_id is None else self.delete_doc(doc_id)

    def _doc_id_of(self, external_id: str) -> int | None:
        row = self.execute("SELECT doc_id FROM documents WHERE external_id = ?",
                           (external_id,)).fetchone()
        return None if row is None else int(row[0])

    def remove(self, doc_ids: Sequence[int], external_ids: Sequence[str]) -> Removed:
        """Remove documents named by doc_id or external id: what was removed, and the ids
        (as given) that named nothing."""
        targets: dict[int, None] = dict.fromkeys(doc_ids)
        missing: list[str] = []
        for external in external_ids:
            doc_id = self._doc_id_of(external)
            if doc_id is None:
                missing.append(external)
            else:
                targets[doc_id] = None
        removed: list[int] = []
        chunks = 0
        for doc_id in targets:
            gone = self.delete_doc(doc_id)
            if gone is not None:
                removed.append(gone[0])
                chunks += gone[1]
        done = set(removed)
        missing += [str(d) for d in doc_ids if d not in done]
        return Removed(tuple(sorted(removed)), chunks, tuple(missing))
