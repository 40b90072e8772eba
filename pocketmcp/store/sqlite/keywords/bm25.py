"""The chunk keyword query scored in numpy: the same numbers as FTS5's bm25().

FTS5 spends nearly all of a large chunk query in bm25(), about 0.75 µs for each chunk a
word is in (the MATCH alone reads a posting in 0.08 µs). Here each word's occurrences are
read as one string from an fts5vocab `instance` table (about 0.25 µs an occurrence), each
chunk's length in tokens comes from an array kept for the index (lengths.py), and the
arithmetic is FTS5's own, operation for operation, so every score is
the same double as bm25()'s. Only plain words over every chunk go this way: a query with a
phrase or a CJK word, or over some documents only, runs in FTS5 (`best_chunks` says None).
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from pocketmcp import logs
from pocketmcp.errors import StoreError
from pocketmcp.store.sqlite.connect import id_list, sqlite_errors, sqlite_module
from pocketmcp.store.sqlite.keywords.lengths import ChunkLengths, Sizes, numbers, state
from pocketmcp.store.sqlite.log import ChunkLog

log = logs.get("pocketmcp.keywords")

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]

INSTANCES = "temp.pocketmcp_chunk_instances"  # made on every reader connection (connect.py)
K1, B = 1.2, 0.75  # FTS5's constants
# Below this many postings (chunks holding the words, summed) FTS5 scores a query sooner: at
# 1M chunks 0.25 against 0.15 ms p50 under 200, even from 200 to 1,000 (0.67-0.79 against
# 0.68-1.09 ms), 1.20 against 1.85 ms from 1,000 to 2,000, 10 against 17 ms at 20,000.
FROM_POSTINGS = 500


def tokenizer_of(conn: Any) -> str:
    """The chunk table's tokenize option, as its CREATE statement gives it."""
    row = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'chunks_fts'").fetchone()
    found = re.search(r"tokenize\s*=\s*'((?:[^']|'')*)'", str(row[0]) if row else "")
    return found.group(1).replace("''", "'") if found else "unicode61"


class _Tokenizer:
    """FTS5's own tokens of a word (an in-memory table with the same tokenizer)."""

    def __init__(self, option: str) -> None:
        self._lock = threading.Lock()
        self._conn = sqlite_module().connect(":memory:", check_same_thread=False,
                                             isolation_level=None)
        quoted = option.replace("'", "''")
        self._conn.execute(f"CREATE VIRTUAL TABLE t USING fts5(x, tokenize='{quoted}')")
        self._conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, instance)")
        self._known: dict[str, tuple[str, ...]] = {}

    def tokens(self, word: str) -> tuple[str, ...]:
        with self._lock:
            if word not in self._known:
                self._conn.execute("INSERT INTO t(rowid, x) VALUES (1, ?)", (word,))
                found = tuple(str(r[0]) for r in self._conn.execute(
                    "SELECT term FROM v ORDER BY offset"))
                self._conn.execute("DELETE FROM t")
                if len(self._known) > 100_000:
                    self._known.clear()
                self._known[word] = found
            return self._known[word]


_tokenizers: dict[str, _Tokenizer] = {}
_tokenizers_lock = threading.Lock()


def _tokenizer(option: str) -> _Tokenizer:
    with _tokenizers_lock:
        if option not in _tokenizers:
            _tokenizers[option] = _Tokenizer(option)
        return _tokenizers[option]


def score(per_term: Sequence[tuple[I64, F64, float]], lengths: Sizes, rows: int, tokens: int,
          k: int) -> tuple[I64, F64] | None:
    """The best `k` chunks by bm25, best first (ties by chunk id): (chunk ids, scores).
    `per_term`: (chunk ids ascending, frequency, idf) of each phrase in the query's order.
    None when a chunk's length is not known."""
    if not per_term:
        return np.zeros(0, np.int64), np.zeros(0, np.float64)
    # Each term's ids are ascending: a stable sort merges them (np.unique hashes, 4x slower).
    every = np.sort(np.concatenate([ids for ids, _, _ in per_term]), kind="stable")
    chunks = every[np.concatenate(([True], every[1:] != every[:-1]))] if every.size else every
    if chunks.size == 0:
        return chunks, np.zeros(0, np.float64)
    known = lengths.of(chunks)
    if known is None:
        return None
    size = known.astype(np.float64)
    avgdl = float(tokens) / float(rows)
    # bm25(): score += idf * ((f * (k1 + 1.0)) / (f + k1 * (1 - b + b * D / avgdl)))
    norm = K1 * ((1 - B) + (B * size) / avgdl)
    total = np.zeros(chunks.size, np.float64)
    for ids, freq, idf in per_term:
        f = np.zeros(chunks.size, np.float64)
        f[np.searchsorted(chunks, ids)] = freq
        total = total + idf * ((f * (K1 + 1.0)) / (f + norm))
    if chunks.size > k:
        cut = np.partition(total, chunks.size - k)[chunks.size - k]
        keep = np.flatnonzero(total >= cut)  # ties at the cut are settled by chunk id
        chunks, total = chunks[keep], total[keep]
    order = np.lexsort((chunks, -total))[:k]
    return chunks[order], total[order]


def occurrences(conn: Any, term: str, title_weight: float) -> tuple[I64, F64]:
    """(chunk ids ascending, bm25's frequency) of one term: each occurrence in the title
    counts `title_weight`, in the text 1.0, summed in FTS5's order (title first)."""
    text = conn.execute(f"SELECT group_concat(doc * 2 + (col = 'title')) FROM {INSTANCES} "
                        "WHERE term = ?", (term,)).fetchone()[0]
    if not text:
        return np.zeros(0, np.int64), np.zeros(0, np.float64)
    codes = numbers(text)  # by chunk, then column, then offset
    docs, in_title = codes >> 1, codes & 1
    starts = np.flatnonzero(np.concatenate(([True], docs[1:] != docs[:-1])))
    counts = np.diff(np.append(starts, codes.size))
    titles = np.add.reduceat(in_title, starts)
    chunk_ids = docs[starts]
    if title_weight == 1.0 or not titles.any():
        return chunk_ids, counts.astype(np.float64)
    freq = np.zeros(chunk_ids.size, np.float64)
    # One occurrence at a time, as bm25() adds them: a sum of weights is not exact.
    for i in range(int(titles.max())):
        freq[titles > i] += title_weight
    texts = counts - titles
    mixed = (titles > 0) & (texts > 0)
    for i in range(int(texts[mixed].max()) if mixed.any() else 0):
        freq[mixed & (texts > i)] += 1.0
    plain = titles == 0
    freq[plain] = texts[plain]
    return chunk_ids, freq


def best_chunks(conn: Any, db_path: Path, lengths: ChunkLengths, chunk_log: ChunkLog,
                words: Sequence[str], k: int, title_weight: float
                ) -> list[tuple[int, float, int]] | None:
    """The chunk query `any of words` (one MATCH phrase each, in order): the best `k`
    (chunk id, score, doc id), best first, ties by chunk id, as FTS5's bm25() ranks them.
    None when FTS5 should run it (a word of several tokens, lengths not read yet).
    Call inside a read snapshot."""
    try:
        tokenizer = _tokenizer(tokenizer_of(conn))
        terms = [tokenizer.tokens(w) for w in words]
        if not terms or any(len(t) != 1 for t in terms):
            return None
        identity, seq, totals = state(conn)
        if totals is None or totals[0] <= 0:
            return None
        known = lengths.get(conn, db_path, chunk_log, identity, seq, totals[0])
        if known is None:
            return None
        rows, tokens = totals
        per_term = []
        for (term,) in terms:
            ids, freq = occurrences(conn, term, title_weight)
            idf = math.log((rows - ids.size + 0.5) / (ids.size + 0.5))
            per_term.append((ids, freq, idf if idf > 0.0 else 1e-6))
        best = score(per_term, known, rows, tokens, k)
        if best is None:
            return None
        chunk_ids, scores = best
        docs = dict(conn.execute(
            "SELECT chunk_id, doc_id FROM chunks WHERE chunk_id IN "
            "(SELECT value FROM json_each(?))", (id_list(chunk_ids),)).fetchall())
    except ValueError as exc:
        log.warning("FTS5 scores this keyword query", error=str(exc))
        return None
    except sqlite_errors() as exc:
        raise StoreError(f"{db_path}: {exc}") from exc
    return [(int(c), float(s), int(docs[int(c)])) for c, s in zip(chunk_ids, scores, strict=True)
            if int(c) in docs]
