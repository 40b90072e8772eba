"""The chunk FTS5 query, whole or in two halves of the chunks at once.

Nearly all of a large chunk query's time is bm25() scoring each matching row. Run as two
halves of the chunks by rowid, on the reader's connection and a second one in a helper
thread (its index's, threads.py), each scores half of them, and SQLite lets go of Python's
lock meanwhile. bm25() takes its statistics from the whole table, so a row scores the same in
either half, and the best of both halves are the best of the whole. Only worth it when the
other core is free: the search op asks for it in keyword mode alone (textsearch.py), for a
query FTS5 scores itself (one that numpy cannot, keywords/bm25.py: phrases and CJK words, or
while the lengths are read).
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import suppress
from pathlib import Path
from typing import Any

from pocketmcp.errors import StoreError
from pocketmcp.store.sqlite.connect import open_sync_reader, sqlite_errors
from pocketmcp.store.sqlite.threads import Threads

SPLIT_POSTINGS = 4000  # a chunk query over at least this many postings runs in two halves

Row = tuple[int, float, int]  # chunk id, score, doc id


def second_connection(db_path: Path, map_bytes: int) -> Any:
    """Another read-only connection to the index, mapped as a reader's is."""
    second = open_sync_reader(db_path)
    try:
        second.execute(f"PRAGMA mmap_size = {map_bytes}")
    except sqlite_errors() as exc:
        second.close()
        raise StoreError(f"{db_path}: {exc}") from exc
    return second


def chunk_rows(conn: Any, db_path: Path, where: str, args: Sequence[Any]) -> list[Row]:
    """The best chunks by BM25 (title weight, MATCH, the `where` condition's values, limit),
    best first, ties by chunk id."""
    try:
        rows = conn.execute(
            "WITH top AS (SELECT f.rowid AS chunk_id, -bm25(chunks_fts, ?, 1.0) AS score "
            f"FROM chunks_fts f WHERE chunks_fts MATCH ?{where} ORDER BY score DESC "
            "LIMIT ?) SELECT top.chunk_id, top.score, c.doc_id FROM top "
            "JOIN chunks c ON c.chunk_id = top.chunk_id ORDER BY top.score DESC",
            args).fetchall()
    except sqlite_errors() as exc:
        raise StoreError(f"{db_path}: {exc}") from exc
    return sorted(((int(r[0]), float(r[1]), int(r[2])) for r in rows),
                  key=lambda r: (-r[1], r[0]))


def split_rows(conn: Any, second: Any, db_path: Path, args: Sequence[Any], k: int,
               middle: int, helpers: Threads) -> list[Row]:
    """The chunk query (title weight, MATCH) over rowids below `middle` on `conn` and from
    it on in one of the `helpers` on `second`, merged: the best `k` (once the helpers are
    closed, the whole query on `conn`: the same best `k`)."""
    weight, match = args
    upper = helpers.submit(chunk_rows, second, db_path, " AND f.rowid >= ?",
                           [weight, match, middle, k])
    if upper is None:
        return chunk_rows(conn, db_path, "", [weight, match, k])
    try:
        lower = chunk_rows(conn, db_path, " AND f.rowid < ?", [weight, match, middle, k])
    except BaseException:
        with suppress(Exception):
            upper.result()  # the second connection is free again before this returns
        raise
    return sorted(lower + upper.result(), key=lambda r: (-r[1], r[0]))[:k]
