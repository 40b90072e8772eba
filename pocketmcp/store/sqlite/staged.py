"""The two stages of writing a document to a SQLite index (the writer's side).

A document is written for keyword search as soon as it is chunked: chunks whose text the
index already holds get that vector at once, the others are written `waiting` (no row in
vec_chunks, no entry in the chunk log) and the document is queued in `embed_queue`. When
the embedder returns their vectors, `add_vectors` gives each waiting chunk its vector in
place: the row keeps its chunk id (so an id or `mcp+doc://` link read meanwhile still names
it) and its keyword row, `waiting` turns 0, and the chunk log notes it as added (a trigger,
schema.py), which the vector file and the chunk lengths follow. Ids no longer reach the
vector file in ascending order: vectors/file.py says how it finds rows anyway. Both stages
run inside the writer's transactions, so neither is ever half-written, and the second finds
the document as the first left it or writes nothing.

A contentless FTS5 table keeps, in its totals (rows, and tokens per column: what BM25's
document frequencies and average length come from), every row ever inserted: its deletes
cannot take theirs off. A waiting chunk's keyword row is the one it keeps, so a folder
indexed in two stages counts each chunk once, as one indexed in one stage does. Only the
keyword rows of chunks that go while they wait (their document changed before its vectors
came) would count where one stage never wrote them: what those rows added is noted
(`fts_debt` in meta) when they go, and taken off the totals in a transaction of their own
right after (`settle_keywords`, before FTS5 reads them), so searches never see them, nor an
exported copy's totals differ.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from pocketmcp.messages import Chunk
from pocketmcp.store.sqlite.keywords.lengths import varint
from pocketmcp.store.sqlite.log import stored_vectors
from pocketmcp.store.writes import check_vectors

DEBT_KEY = "fts_debt"  # meta: [rows, [tokens per column]] to take off chunks_fts's totals
NO_DEBT: tuple[int, tuple[int, ...]] = (0, ())


class StagedWrites:
    """Mixed into SqliteWriter, whose connection and chunk writing it uses."""

    dim: int
    owes_keywords = False  # keyword rows deleted and their totals not yet settled
    # What the keyword rows deleted in this transaction added to the totals: (rows, tokens
    # per column), noted in meta once, before the commit.
    _owed = NO_DEBT

    def _sql(self, sql: str, args: Sequence[Any] = ()) -> Any:
        raise NotImplementedError

    def _many(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        raise NotImplementedError

    _fresh: dict[int, tuple[int, bytes]]  # chunk id -> (doc id, vector) of this transaction

    def _rows_of(self, chunks: Sequence[Chunk], vectors: bytes) -> list[bytes | None]:
        """Each chunk's vector, cut from the float32 matrix `vectors`."""
        width = self.dim * 4
        return [vectors[i * width:(i + 1) * width] for i in range(len(chunks))]

    def _known(self, chunks: Sequence[Chunk]) -> list[bytes | None]:
        """The stored vector of each chunk whose text the index holds with one, else None."""
        found = stored_vectors(lambda sql, args: self._sql(sql, args).fetchall(),
                               (c.sha256 for c in chunks), self.dim)
        return [found.get(c.sha256) for c in chunks]

    def _write_vectors(self, doc_id: int, ids: Sequence[int], chunks: Sequence[Chunk],
                       vectors: Sequence[bytes | None]) -> None:
        """The vec_chunks rows of these chunks (ids as written), those with a vector; a row
        at a time, so chunks that cut their text when read (an import's) are held one at a
        time."""
        def rows() -> Iterator[tuple[Any, ...]]:
            for i, c, v in zip(ids, chunks, vectors, strict=True):
                if v is not None:
                    self._fresh[i] = (doc_id, v)
                    yield (i, v, doc_id, c.idx, c.start, c.end, c.text)

        self._many(
            "INSERT INTO vec_chunks(chunk_id, embedding, doc_id, idx, start_off, end_off, text) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)", rows())

    def add_vectors(self, doc_id: int, sha256: str, chunks: Sequence[Chunk],
                    vectors: bytes) -> bool:
        """The vectors of a document's waiting `chunks`, as the embedder returned them for
        its text `sha256`: each chunk gets its vector under the id it has. False, and
        nothing written, when the document has changed since (another version waits, or it
        is gone) or has its vectors already."""
        check_vectors(f"document {doc_id}", len(chunks), vectors, self.dim)
        row = self._sql("SELECT d.content_sha256 FROM embed_queue q JOIN documents d "
                        "ON d.doc_id = q.doc_id WHERE q.doc_id = ?", (doc_id,)).fetchone()
        if row is None or row[0] != sha256:
            return False
        waiting = self._sql("SELECT chunk_id, idx, text_sha256 FROM chunks WHERE doc_id = ? "
                            "AND waiting = 1 ORDER BY idx", (doc_id,)).fetchall()
        if [(r[1], r[2]) for r in waiting] != [(c.idx, c.sha256) for c in chunks]:
            return False
        ids = [int(r[0]) for r in waiting]
        # The trigger notes each in the chunk log: the vector file and lengths follow.
        self._many("UPDATE chunks SET waiting = 0 WHERE chunk_id = ?", [(i,) for i in ids])
        self._write_vectors(doc_id, ids, chunks, self._rows_of(chunks, vectors))
        self._sql("DELETE FROM embed_queue WHERE doc_id = ?", (doc_id,))
        return True

    def _forget_keywords(self, waiting: Sequence[int]) -> None:
        """Delete the keyword rows of waiting chunks that go (their document changed before
        its vectors came), adding what they added to the totals to this transaction's debt
        (noted once, before the commit: `_note_debt`; the next transaction takes it off:
        `settle_keywords`)."""
        if not waiting:
            return
        rows, owed = self._owed
        columns = list(owed)
        for (size,) in self._sql("SELECT sz FROM chunks_fts_docsize WHERE id IN "
                                 "(SELECT value FROM json_each(?))", (_texts(waiting),)):
            rows += 1
            blob, at, column = bytes(size), 0, 0
            while at < len(blob):
                tokens, at = varint(blob, at)
                columns += [0] * (column + 1 - len(columns))
                columns[column] += tokens
                column += 1
        self._many("DELETE FROM chunks_fts WHERE rowid = ?", [(i,) for i in waiting])
        self._owed = (rows, tuple(columns))
        self.owes_keywords = True

    def _note_debt(self) -> None:
        """Before the commit: note in meta, once, what this transaction's deleted keyword
        rows added (kept there should the process end before they are settled)."""
        rows, columns = self._owed
        if not rows:
            return
        self._owed = NO_DEBT
        before, totals = _debt(self._sql)
        totals += [0] * (len(columns) - len(totals))
        for i, tokens in enumerate(columns):
            totals[i] += tokens
        self._sql("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                  (DEBT_KEY, json.dumps([before + rows, totals])))

    def keywords_owed(self) -> bool:
        """Whether meta notes totals still to take off (read outside a transaction too)."""
        return _debt(self._sql)[0] > 0

    def settle_keywords(self) -> None:
        """Take what deleted keyword rows of waiting chunks added off chunks_fts's totals;
        first thing in a transaction, before FTS5 loads them."""
        self.owes_keywords = False
        rows, columns = _debt(self._sql)
        if not rows:
            return
        found = self._sql("SELECT block FROM chunks_fts_data WHERE id = 1").fetchone()
        if found is not None and found[0]:
            block = bytes(found[0])
            total, at = varint(block)
            totals: list[int] = []
            while at < len(block):
                value, at = varint(block, at)
                totals.append(value)
            fixed = [max(0, total - rows)] + [max(0, t - (columns[i] if i < len(columns)
                                                           else 0))
                                               for i, t in enumerate(totals)]
            self._sql("UPDATE chunks_fts_data SET block = ? WHERE id = 1",
                      (b"".join(_varint(v) for v in fixed),))
        self._sql("DELETE FROM meta WHERE key = ?", (DEBT_KEY,))


def _debt(sql: Any) -> tuple[int, list[int]]:
    row = sql("SELECT value FROM meta WHERE key = ?", (DEBT_KEY,)).fetchone()
    if row is None:
        return 0, []
    rows, columns = json.loads(row[0])
    return int(rows), [int(c) for c in columns]


def _varint(value: int) -> bytes:
    """An SQLite varint (values below 2**56: seven bits a byte, most significant first)."""
    out = [value & 0x7F]
    value >>= 7
    while value:
        out.append(0x80 | (value & 0x7F))
        value >>= 7
    return bytes(reversed(out))


def _texts(values: Sequence[Any]) -> str:
    return json.dumps([v if isinstance(v, str) else int(v) for v in values])
