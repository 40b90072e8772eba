"""Separate databases: named indexes beside the main one, one SQLite file each.

A database is `DATABASES_DIR/<name>.db`, with the main index's schema and the service's model.
This process keeps one writer per database (opened on first use under the database's lock,
closed with the service) and serialises its writes in a worker thread; reads go through
read-only connections, so they go on while another process holds a database's writer lock.
Every operation without a `db_name` works on the main index instead.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio
import msgspec

from pocketmcp.core.safe import safe_text
from pocketmcp.documents import NewDoc, delete_documents, prepare, upsert_documents, write_prepared
from pocketmcp.errors import (
    InvalidRequest,
    ModelMismatchError,
    NotFound,
    PocketError,
    StoreError,
    WriterBusyError,
)
from pocketmcp.service import ReaderPool, Service
from pocketmcp.store.queries import IndexReader, VectorHit
from pocketmcp.store.writes import IndexWriter

T = TypeVar("T")

_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
MAX_TOP_K = 100


class Created(msgspec.Struct, frozen=True):
    db_path: str
    created: bool


class Inserted(msgspec.Struct, frozen=True):
    doc_id: int
    chunk_count: int


class Similar(msgspec.Struct, frozen=True):
    chunk_id: int
    doc_id: int
    text: str
    score: float


def db_path(root: Path, name: str) -> Path:
    """The file of database `name` in `root`; InvalidRequest for a name that is not safe."""
    if _NAME.fullmatch(name) is None:
        shown = name if len(name) <= 80 else name[:80] + "..."
        raise InvalidRequest(f"db_name {shown!r} is not valid: use 1-64 letters, digits, "
                             "'_' or '-'")
    return root / f"{name}.db"


class _Db:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock = anyio.Lock()  # guards opening the writer
        self.limiter = anyio.CapacityLimiter(1)  # one write at a time, in a worker thread
        self.writer: IndexWriter | None = None
        self.readers = ReaderPool(path)


class Databases:
    """The named databases this process has used: a writer each (opened lazily) and a pool
    of read-only connections. `close()` closes them all."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._dbs: dict[str, _Db] = {}
        self._closed = False

    def path(self, name: str) -> Path:
        return db_path(self.root, name)

    def _db(self, name: str, *, must_exist: bool) -> _Db:
        path = self.path(name)
        if must_exist and not path.is_file():
            raise NotFound(f"no database named {name!r}; call create_database first, "
                           "or leave db_name out to use the main index")
        db = self._dbs.get(name)
        if db is None:
            db = self._dbs[name] = _Db(path)
        return db

    async def _writer(self, db: _Db, model_id: str, dim: int) -> tuple[IndexWriter, bool]:
        """The database's writer, opened (creating the file) if need be; True if created."""
        async with db.lock:
            if self._closed:
                raise PocketError("the server is shutting down")
            if db.writer is not None:
                return db.writer, False
            existed = db.path.exists()

            def open_writer() -> IndexWriter:
                return IndexWriter(db.path, model_id=model_id, dim=dim)

            # Raises WriterBusyError while another process holds the lock; retried next call.
            try:
                db.writer = await anyio.to_thread.run_sync(open_writer)
            except OSError as exc:  # the folder cannot be made, the disk is full, ...
                raise StoreError(f"cannot create the database {db.path}: {exc}") from exc
            return db.writer, not existed

    async def create(self, name: str, *, model_id: str, dim: int) -> bool:
        """Make sure database `name` exists; True when this call created its file."""
        db = self._db(name, must_exist=False)
        _, created = await self._writer(db, model_id, dim)
        return created

    async def write(self, name: str, fn: Callable[[IndexWriter], T], *, model_id: str,
                    dim: int) -> T:
        """Run `fn(writer)` in a worker thread, one at a time per database."""
        db = self._db(name, must_exist=True)
        writer, _ = await self._writer(db, model_id, dim)
        return await anyio.to_thread.run_sync(lambda: fn(writer), limiter=db.limiter)

    def readers(self, name: str) -> ReaderPool:
        """Read-only connections to database `name`; NotFound when it was never created."""
        return self._db(name, must_exist=True).readers

    def close(self) -> None:
        """Checkpoint and close every writer (releasing its lock) and every reader."""
        self._closed = True
        for db in self._dbs.values():
            db.readers.close()
            if db.writer is not None:
                db.writer.close()
                db.writer = None


# -- the operations behind the tools -----------------------------------------------------------

def _spec(service: Service) -> tuple[str, int]:
    assert service.engine is not None
    return service.engine.spec.model_id, service.engine.spec.dim


async def create_database(service: Service, db_name: str) -> Created:
    path = service.databases.path(db_name)
    await service.wait_ready()
    model_id, dim = _spec(service)
    try:
        created = await service.databases.create(db_name, model_id=model_id, dim=dim)
    except WriterBusyError:
        created = False  # another process holds its lock: it has made (or is making) the file
    return Created(db_path=str(path.resolve()), created=created)


async def insert_document(service: Service, text: str, metadata: dict[str, Any] | None = None,
                          db_name: str | None = None) -> Inserted:
    """Chunk, embed and store one document; searchable as soon as this returns."""
    doc = NewDoc(text=text, metadata=metadata)
    if db_name is None:
        upserted = (await upsert_documents(service, [doc]))[0]
        return Inserted(upserted.doc_id, upserted.chunks)
    service.databases.path(db_name)
    await service.wait_ready()
    model_id, dim = _spec(service)
    prepared = await prepare(service, [doc], service.databases.readers(db_name))
    written = await service.databases.write(
        db_name, lambda writer: write_prepared(writer, prepared), model_id=model_id, dim=dim)
    return Inserted(written[0].doc_id, written[0].chunks)


def _query(service: Service, text: str) -> str:
    query = safe_text(text)
    if not query.strip():
        raise InvalidRequest("text is empty: give the text to find similar documents to")
    if len(query.encode("utf-8")) > service.config.max_file_bytes:
        raise InvalidRequest(f"text is larger than MAX_FILE_MB "
                             f"({service.config.max_file_bytes} bytes)")
    return query


async def find_similar(service: Service, text: str, top_k: int = 10,
                       db_name: str | None = None) -> list[Similar]:
    """The chunks nearest to `text` by cosine similarity, best first."""
    if not 1 <= top_k <= MAX_TOP_K:
        raise InvalidRequest(f"top_k must be from 1 to {MAX_TOP_K}")
    if db_name is not None:
        service.databases.path(db_name)
    query = _query(service, text)
    if db_name is None:
        from pocketmcp.search import search

        matches = await search(service, query, top_k=top_k, mode="vector")
        return [Similar(m.chunk_id, m.doc_id, m.text, m.score) for m in matches]
    await service.wait_ready()
    assert service.engine is not None
    readers = service.databases.readers(db_name)
    vector = await anyio.to_thread.run_sync(service.engine.embedder.embed_query, query,
                                            limiter=service.query_limiter)
    model_id, dim = _spec(service)

    def knn(reader: IndexReader) -> list[VectorHit]:
        stored = reader.model()
        if stored is not None and stored != (model_id, dim):
            raise ModelMismatchError(reader.db_path, stored[0], stored[1], model_id, dim)
        return reader.search_vector(vector.tobytes(), top_k)

    hits = await readers.run(knn)
    return [Similar(h.chunk_id, h.doc_id, h.text, round(1.0 - h.distance, 6)) for h in hits]


async def delete_document(service: Service, doc_id: int, db_name: str | None = None) -> int:
    """Remove one document; the number of chunks removed. NotFound for an unknown doc_id."""
    if db_name is None:
        deleted = await delete_documents(service, [doc_id], None)
        if not deleted.deleted_doc_ids:
            raise NotFound(f"no document with doc_id {doc_id} in the main index")
        return deleted.deleted_chunks
    service.databases.path(db_name)
    await service.wait_ready()
    model_id, dim = _spec(service)

    def delete(writer: IndexWriter) -> tuple[int, int] | None:
        with writer.transaction():
            return writer.delete_doc(doc_id)

    gone = await service.databases.write(db_name, delete, model_id=model_id, dim=dim)
    if gone is None:
        raise NotFound(f"no document with doc_id {doc_id} in database {db_name!r}")
    return gone[1]
