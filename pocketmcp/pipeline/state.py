"""State shared by the actors of one pipeline: in-flight files, counters, queue depths."""

from __future__ import annotations

import itertools
from typing import Any

import anyio
import msgspec
from anyio.streams.memory import MemoryObjectSendStream

GONE = "<gone>"
RECENT_SKIPS = 20  # the latest skipped files kept, with why, for the status


class InFlight:
    """Files sent down the pipeline and not yet committed, with the content they carry.

    The hasher consults this before the index, so a file that changes A -> B -> A while B is
    still on its way is not mistaken for unchanged. Entries live only while in flight, so the
    map is bounded by the pipeline's buffers.
    """

    def __init__(self) -> None:
        self._entries: dict[str, tuple[int, str]] = {}
        self._seq = itertools.count(1)

    def begin(self, rel: str, sha: str) -> int:
        seq = next(self._seq)
        self._entries[rel] = (seq, sha)
        return seq

    def get(self, rel: str) -> str | None:
        entry = self._entries.get(rel)
        return None if entry is None else entry[1]

    def done(self, rel: str, seq: int) -> None:
        entry = self._entries.get(rel)
        if entry is not None and entry[0] == seq:
            del self._entries[rel]

    def __len__(self) -> int:
        return len(self._entries)


class Stats(msgspec.Struct, kw_only=True):
    """Counters of one pipeline run. Mutated only on the event loop."""

    seen: int = 0
    added: int = 0
    updated: int = 0
    rechecked: int = 0  # of the updated: re-read by force and found with the same text
    unchanged: int = 0
    touched: int = 0
    removed: int = 0
    skipped: int = 0
    no_text: int = 0  # of the converted files (images, scans, documents): nothing read in them
    chunks_embedded: int = 0  # given vectors the model computed in this run
    chunks_reused: int = 0  # given a vector the index held: same text (store/writes.py)
    chunks_removed: int = 0  # gone without a successor of the same text
    chunks_written: int = 0  # written for keyword search (stage one)
    chunks_vectors: int = 0  # given their vectors (stage two), embedded or reused
    chunks_waiting: int = 0  # in the index, still waiting for vectors, as of the run's end
    embed_ms: float = 0.0
    scan_done: bool = False
    last_error: str | None = None
    recent_skips: list[tuple[str, str]] = msgspec.field(default_factory=list)  # (path, why)
    cut: list[tuple[str, str]] = msgspec.field(default_factory=list)  # (path, what was left)
    cut_files: int = 0  # files indexed in part (`cut` keeps the latest few)

    def skip(self, rel: str, reason: str) -> None:
        """Count a file that is not indexed, and keep why among the latest few."""
        self.skipped += 1
        self.recent_skips.append((rel, reason))
        del self.recent_skips[:-RECENT_SKIPS]

    def cut_short(self, rel: str, left: str) -> None:
        """Note a file indexed only in part, and what of it was left, among the latest few."""
        self.cut_files += 1
        self.cut.append((rel, left))
        del self.cut[:-RECENT_SKIPS]

    def counts(self) -> dict[str, int]:
        """The run's counts, as every report gives them (`index`'s summary, the log lines,
        the status tool; docs/indexing.md defines them). Each file once: a file re-read by
        force and found with the same text is unchanged. Each chunk written once: embedded
        or reused (the rest wait for vectors, keywords first); chunks_removed are old
        chunks that left with no successor of the same text."""
        return {"added": self.added, "updated": self.updated - self.rechecked,
                "unchanged": self.unchanged + self.touched + self.rechecked,
                "removed": self.removed, "skipped": self.skipped, "no_text_found": self.no_text,
                "chunks_embedded": self.chunks_embedded, "chunks_reused": self.chunks_reused,
                "chunks_removed": self.chunks_removed}

    @property
    def processed(self) -> int:
        return self.added + self.updated + self.unchanged + self.touched + self.skipped


def depth(stream: MemoryObjectSendStream[Any]) -> dict[str, int]:
    """How full a stream between two actors is, and how many senders wait on it."""
    st = stream.statistics()
    return {"used": st.current_buffer_used, "max": int(st.max_buffer_size),
            "waiting_senders": st.tasks_waiting_send}


class Backlog:
    """Between the writer and the embedder of one pipeline: the documents taken for their
    vectors and not yet written (not to be fetched again meanwhile), those the provider
    refused (left waiting, keyword-searchable, until the next start), and a wake-up for the
    embedder when the writer has committed something it may want."""

    def __init__(self) -> None:
        self.sent: set[int] = set()
        self.refused: set[int] = set()
        self._wake = anyio.Event()

    def skip(self) -> list[int]:
        return sorted(self.sent | self.refused)

    def wake(self) -> None:
        self._wake.set()

    async def wait(self, *, seconds: float) -> None:
        """Until `wake` (or `seconds`), then arm the next wake-up."""
        with anyio.move_on_after(seconds):
            await self._wake.wait()
        self._wake = anyio.Event()

    def committed(self, doc_id: int) -> None:
        self.sent.discard(doc_id)
        self.wake()
