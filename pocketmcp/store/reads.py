"""What every store reads alike: the statements SQLite and Postgres run the same, written
once in `?` style (an engine's `query` runs them in its own), and the rows they read.

An engine's reader mixes in `CommonReads` and gives it `query`, `stored_vector` and a
`Dialect`: how it writes the few parts that differ. Everything else of reading is the
engine's own: keyword search, vectors, snapshots.

A document is written in two stages: its text and keywords as soon as it is chunked (its
chunks waiting, with a row in `embed_queue` ranking it), and its vectors once the embedder
returns them; keyword search finds waiting chunks at once.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from typing import Any, ClassVar

import anyio

from pocketmcp.core.identity import Identity
from pocketmcp.messages import Link
from pocketmcp.store import rows as r
from pocketmcp.store.archive import StoredChunk, StoredDoc
from pocketmcp.store.filters import Dialect, DocFilter, conditions
from pocketmcp.store.related import MAX_INCOMING, Linker, LinkRow


def mean_by_doc(cosines: Iterable[float], docs: Iterable[int]) -> dict[int, float]:
    """Each document's mean of the cosines of its chunks (`docs`: the chunk's document)."""
    sums: dict[int, list[float]] = {}
    for cos, doc in zip(cosines, docs, strict=True):
        sums.setdefault(int(doc), []).append(float(cos))
    return {doc: sum(found) / len(found) for doc, found in sums.items()}


async def made(identity: Callable[[], Awaitable[Identity | None]], stopping: anyio.Event,
               there: Callable[[], bool] = lambda: True) -> Identity | None:
    """Wait until some writer has made an index (`there`: whether it can be yet, cheaply;
    `identity`: what it records, once its schema is committed): what it records; None if
    `stopping` is set first."""
    while not stopping.is_set():
        if there():
            stored = await identity()
            if stored is not None:
                return stored
        with anyio.move_on_after(0.2):
            await stopping.wait()
    return None


# A chunk's text is cut from its document (offsets are in characters, as substr's are):
# reading it from SQLite's vec0 would scan the vectors.
_TEXT = "substr(d.content, c.start_off + 1, c.end_off - c.start_off)"
_CHUNK = "c.chunk_id, c.doc_id, c.idx, c.start_off, c.end_off, " + _TEXT
# What a search match shows of its document, after its chunk's own columns ({j}: the
# dialect's `json`).
HIT_DOC = ("d.external_id, d.uri, d.title, d.source, c.section, d.library, d.size_bytes, "
           "d.mtime_ns, d.created, d.modified, d.updated_at, d.tags{j}")
_HIT = f"{_CHUNK}, {HIT_DOC} FROM chunks c JOIN documents d ON d.doc_id = c.doc_id"
_DOC = ("SELECT d.doc_id, d.external_id, d.source, d.uri, d.title, d.library, d.metadata{j}, "
        "d.content_sha256, d.chunk_count, d.created_at, d.updated_at, d.properties{j}, "
        "d.tags{j}, d.created, d.modified, d.size_bytes, d.mtime_ns FROM documents d WHERE ")
# A document's links, each with the documents it resolves to (one row per link and
# document), and the documents linking to one (itself left out).
_OUTGOING = ("SELECT l.idx, l.target, l.kind, d.doc_id, d.title, d.external_id, d.source "
             "FROM links l LEFT JOIN doc_keys k ON k.key = l.key "
             "LEFT JOIN documents d ON d.doc_id = k.doc_id "
             "WHERE l.doc_id = ? ORDER BY l.idx, d.doc_id")
_INCOMING = ("SELECT DISTINCT d.doc_id, d.title, d.external_id, d.source FROM doc_keys k "
             "JOIN links l ON l.key = k.key JOIN documents d ON d.doc_id = l.doc_id "
             "WHERE k.doc_id = ? AND l.doc_id != ? ORDER BY d.doc_id LIMIT ?")
_LAST_IDX = 2**31 - 1  # chunk positions are 32-bit integers on Postgres
_STORED = ("SELECT doc_id, external_id, source, uri, title, library, metadata{j}, "
           "properties{j}, tags{j}, created, modified, content, content_sha256, size_bytes, "
           "mtime_ns, created_at, updated_at FROM documents WHERE doc_id > ? ORDER BY doc_id "
           "LIMIT ?")
PAGE = 100  # documents an export reads at a time
_LINES = "start_line, end_line, start_page, end_page"  # a chunk's place (store/lines.py)


class CommonReads:
    """The reads both stores answer alike (mixed into each engine's reader)."""

    dialect: ClassVar[Dialect]

    def query(self, sql: str, args: Sequence[Any] = ()) -> list[Any]:
        """Rows of a read-only statement written in `?` style."""
        raise NotImplementedError

    def stored_vector(self, chunk_id: int, column: Any) -> bytes | None:
        """A chunk's vector (float32, little-endian) from its `Dialect.vector` column; None
        while it waits for one."""
        raise NotImplementedError

    def _documents(self, condition: str, args: Sequence[Any]) -> list[r.DocumentRow]:
        return [r.DocumentRow(*row) for row in self.query(
            _DOC.format(j=self.dialect.json) + condition, args)]

    def counts(self) -> dict[str, int]:
        docs = self.query("SELECT count(*), coalesce(sum(chunk_count), 0) FROM documents")[0]
        return {"documents": int(docs[0]), "chunks": int(docs[1]),
                "waiting": self.waiting_count()}  # chunks whose vectors have not come yet

    def doc_state(self, external_id: str) -> r.DocState | None:
        """Digest, stat and library of a document, or None."""
        rows = self.query("SELECT content_sha256, size_bytes, mtime_ns, library FROM documents "
                          "WHERE external_id = ?", (external_id,))
        return r.DocState(str(rows[0][0]), rows[0][1], rows[0][2], rows[0][3]) if rows else None

    def external_ids(self, prefix: str, after: str = "", limit: int = 500) -> list[str]:
        """A page of external ids that start with `prefix`, in order, after `after`."""
        low = max(prefix, after)
        high = prefix + "\U0010ffff"
        return [row[0] for row in self.query(
            "SELECT external_id FROM documents WHERE external_id >= ? AND external_id > ? "
            "AND external_id < ? ORDER BY external_id LIMIT ?", (prefix, low, high, limit))]

    def hits(self, chunk_ids: Sequence[int]) -> dict[int, r.HitRow]:
        """Details of chunks by id (those that still exist)."""
        if not chunk_ids:
            return {}
        among, arg = self.dialect.ids("c.chunk_id", chunk_ids)
        return {int(row[0]): r.HitRow(*row) for row in self.query(
            f"SELECT {_HIT.format(j=self.dialect.json)} WHERE {among}", (arg,))}

    def neighbours(self, doc_id: int, first: int, last: int) -> list[tuple[int, int, int, str]]:
        """(idx, start_off, end_off, text) of a document's chunks first..last, in order."""
        return [(int(a), int(b), int(c), str(d)) for a, b, c, d in self.query(
            f"SELECT c.idx, c.start_off, c.end_off, {_TEXT} FROM chunks c "
            "JOIN documents d ON d.doc_id = c.doc_id "
            "WHERE c.doc_id = ? AND c.idx BETWEEN ? AND ? ORDER BY c.idx",
            (doc_id, first, min(last, _LAST_IDX)))]

    def opening_chunks(self, doc_ids: Sequence[int]) -> list[int]:
        """The first chunk of each of these documents (those that have one), by chunk id."""
        if not doc_ids:
            return []
        among, arg = self.dialect.ids("c.doc_id", doc_ids)
        return sorted(int(row[0]) for row in self.query(
            f"SELECT c.chunk_id FROM chunks c WHERE c.idx = 0 AND {among}", (arg,)))

    def chunk_sizes(self, doc_id: int, first: int, last: int
                    ) -> list[tuple[int, int, int, int]]:
        """(idx, start_off, end_off, tokens) of a document's chunks first..last, in order."""
        return [(int(a), int(b), int(c), int(d)) for a, b, c, d in self.query(
            "SELECT idx, start_off, end_off, tokens FROM chunks WHERE doc_id = ? AND idx "
            "BETWEEN ? AND ? ORDER BY idx", (doc_id, max(first, 0), min(last, _LAST_IDX)))]

    def excerpt(self, doc_id: int, start: int, end: int) -> str | None:
        """A document's text from offset `start` to `end` (None when it is gone)."""
        found = self.query("SELECT substr(content, CAST(? AS integer), CAST(? AS integer)) "
                           "FROM documents WHERE doc_id = ?",
                           (start + 1, max(end - start, 0), doc_id))
        return str(found[0][0]) if found else None

    def spots(self, chunk_ids: Sequence[int]) -> dict[int, r.Spot]:
        """Where chunks lie in their documents' texts: lines and PDF pages, by chunk id."""
        if not chunk_ids:
            return {}
        among, arg = self.dialect.ids("chunk_id", chunk_ids)
        return {int(row[0]): r.Spot(*row[1:]) for row in self.query(
            f"SELECT chunk_id, {_LINES} FROM chunks WHERE {among} AND start_line IS NOT NULL",
            (arg,))}

    def spot(self, doc_id: int, first: int, last: int) -> r.Spot | None:
        """Where a document's chunks first..last lie together: from the first one's first
        line (and page) to the last one's last."""
        found = {int(row[0]): row[1:] for row in self.query(
            f"SELECT idx, {_LINES} FROM chunks WHERE doc_id = ? AND idx IN (?, ?) "
            "AND start_line IS NOT NULL", (doc_id, first, min(last, _LAST_IDX)))}
        if first not in found or last not in found:
            return None
        (start, _, page, _), (_, end, _, end_page) = found[first], found[last]
        return r.Spot(start, end, page, end_page)

    def chunk(self, chunk_id: int) -> r.ChunkRow | None:
        rows = self.query(f"SELECT {_CHUNK}, d.title, d.external_id FROM chunks c JOIN "
                          "documents d ON d.doc_id = c.doc_id WHERE c.chunk_id = ?", (chunk_id,))
        return r.ChunkRow(*rows[0]) if rows else None

    def documents_page(self, where: DocFilter, limit: int, *, sort: r.Sort = "doc_id",
                       after: tuple[str, int] | None = None) -> list[r.DocumentRow]:
        """A page of the documents `where` allows: by doc_id, by last change (newest first)
        or by external id (files by path), after the (modified or external id, doc_id) the
        previous page ended on."""
        sql, args = conditions(where, self.dialect)
        if sort == "path":
            if after is not None:
                sql += " AND d.external_id > ?"
                args.append(after[0])
            order = "d.external_id"  # unique
        elif sort == "modified":
            if after is not None:
                sql += " AND (d.modified < ? OR (d.modified = ? AND d.doc_id < ?))"
                args += [after[0], after[0], after[1]]
            order = "d.modified DESC NULLS LAST, d.doc_id DESC"
        else:
            if after is not None:
                sql += " AND d.doc_id > ?"
                args.append(after[1])
            order = "d.doc_id"
        return self._documents(f"true{sql} ORDER BY {order} LIMIT ?", (*args, limit))

    def doc_ids_where(self, where: DocFilter) -> list[int]:
        """The documents `where` allows, by doc_id."""
        sql, args = conditions(where, self.dialect)
        # Sorted here: ORDER BY doc_id would make SQLite walk every document in doc_id order
        # instead of using the index of the condition (documents.modified, doc_tags).
        return sorted(int(row[0]) for row in self.query(
            f"SELECT d.doc_id FROM documents d WHERE true{sql}", args))

    def libraries(self) -> list[tuple[str, int, int]]:
        """(library, documents, chunks), by name (code point by code point)."""
        return sorted((str(row[0]), int(row[1]), int(row[2])) for row in self.query(
            "SELECT library, count(*), coalesce(sum(chunk_count), 0) FROM documents "
            "GROUP BY library"))

    def document(self, doc_id: int) -> r.DocumentRow | None:
        rows = self._documents("doc_id = ?", (doc_id,))
        return rows[0] if rows else None

    def document_by_external(self, external_id: str) -> r.DocumentRow | None:
        rows = self._documents("external_id = ?", (external_id,))
        return rows[0] if rows else None

    def content(self, doc_id: int) -> str | None:
        rows = self.query("SELECT content FROM documents WHERE doc_id = ?", (doc_id,))
        return str(rows[0][0]) if rows else None

    def all_external_ids(self) -> list[tuple[int, str]]:
        return [(int(row[0]), str(row[1])) for row in self.query(
            "SELECT doc_id, external_id FROM documents ORDER BY doc_id")]

    def outgoing_links(self, doc_id: int) -> list[LinkRow]:
        return [LinkRow(*row) for row in self.query(_OUTGOING, (doc_id,))]

    def incoming_links(self, doc_id: int, limit: int = MAX_INCOMING) -> list[Linker]:
        return [Linker(*row) for row in self.query(_INCOMING, (doc_id, doc_id, limit))]

    # -- chunks that wait for their vectors ----------------------------------------------------

    def waiting_count(self) -> int:
        """How many chunks wait for their vectors (an indexed count)."""
        return int(self.query(
            f"SELECT count(*) FROM chunks WHERE {self.dialect.waiting}")[0][0])

    def embed_backlog(self, limit: int, skip: Sequence[int] = ()) -> list[r.WaitingDoc]:
        """Up to `limit` documents whose chunks wait for vectors, the most recently changed
        first, leaving out the doc ids in `skip` (already on their way)."""
        skipped, arg = self.dialect.ids("q.doc_id", skip)
        heads = self.query(
            "SELECT q.doc_id, d.external_id, d.content_sha256, d.content FROM embed_queue q "
            f"JOIN documents d ON d.doc_id = q.doc_id WHERE NOT ({skipped}) "
            "ORDER BY q.rank DESC, q.doc_id DESC LIMIT ?", (arg, limit))
        if not heads:
            return []
        among, arg = self.dialect.ids("doc_id", [row[0] for row in heads])
        return r.waiting_docs(heads, self.query(
            "SELECT doc_id, idx, start_off, end_off, tokens, text_sha256, section FROM chunks "
            f"WHERE {among} AND {self.dialect.waiting} ORDER BY doc_id, idx", (arg,)))

    def waiting_among(self, chunk_ids: Sequence[int]) -> set[int]:
        """Which of these chunks wait for their vectors."""
        if not chunk_ids:
            return set()
        among, arg = self.dialect.ids("chunk_id", chunk_ids)
        return {int(row[0]) for row in self.query(
            f"SELECT chunk_id FROM chunks WHERE {self.dialect.waiting} AND {among}", (arg,))}

    # -- copies ------------------------------------------------------------------------------

    def stored_documents(self) -> Iterator[StoredDoc]:
        """Every document in doc_id order, with its chunks, vectors and links, PAGE documents
        at a time (blocking). Call inside the reader's `snapshot()`."""
        after = 0
        while page := self.query(_STORED.format(j=self.dialect.json), (after, PAGE)):
            after = page[-1][0]
            among, arg = self.dialect.ids("doc_id", [row[0] for row in page])
            chunks: dict[int, list[StoredChunk]] = {row[0]: [] for row in page}
            for doc_id, chunk_id, idx, start, end, tokens, sha, section, vector in self.query(
                    "SELECT doc_id, chunk_id, idx, start_off, end_off, tokens, text_sha256, "
                    f"section, {self.dialect.vector} FROM chunks WHERE {among} "
                    "ORDER BY doc_id, idx", (arg,)):
                chunks[doc_id].append(StoredChunk(idx, start, end, tokens, sha, section,
                                                  self.stored_vector(chunk_id, vector)))
            links: dict[int, list[Link]] = {row[0]: [] for row in page}
            for doc_id, target, key, kind in self.query(
                    f"SELECT doc_id, target, key, kind FROM links WHERE {among} "
                    "ORDER BY doc_id, idx", (arg,)):
                links[doc_id].append(Link(target, key, kind))
            for (doc_id, external_id, source, uri, title, library, metadata, properties, tags,
                 created, modified, content, sha, size, mtime, first, last) in page:
                yield StoredDoc(
                    external_id=external_id, source=source, uri=uri, title=title,
                    library=library, metadata=_sorted(metadata),
                    properties=_sorted(properties), tags=tags, created=created,
                    modified=modified, content=content, sha256=sha, size_bytes=size,
                    mtime_ns=mtime, first_indexed_at=first, indexed_at=last,
                    links=tuple(links[doc_id]), chunks=tuple(chunks[doc_id]))


def _sorted(text: str) -> str:
    """JSON with its keys in order, as SQLite's writer keeps it (Postgres's jsonb has its
    own order and spacing)."""
    return json.dumps(json.loads(text), ensure_ascii=False, sort_keys=True)
