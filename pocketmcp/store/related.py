"""Links between documents, resolved when read: a link points at every document that has
its key (store/facts.py), whichever of the two was indexed first. The SQLite store's queries
are here; the Postgres store's reader answers the same (`LinkReader`)."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import msgspec

from pocketmcp.errors import NotSupported
from pocketmcp.store.api import Reader
from pocketmcp.store.sqlite.queries import SqliteReader

MAX_INCOMING = 1000


class LinkRow(msgspec.Struct, frozen=True):
    idx: int
    target: str
    kind: str
    doc_id: int | None  # None: no indexed document has the target's name
    title: str | None
    external_id: str | None
    source: str | None


class Linker(msgspec.Struct, frozen=True):
    doc_id: int
    title: str
    external_id: str
    source: str


@runtime_checkable
class LinkReader(Protocol):
    """A store's reader that reads links itself (Postgres)."""

    def outgoing_links(self, doc_id: int) -> list[LinkRow]: ...
    def incoming_links(self, doc_id: int, limit: int) -> list[Linker]: ...


def outgoing(reader: Reader, doc_id: int) -> list[LinkRow]:
    """A document's links in the order written, each with the documents it resolves to."""
    if isinstance(reader, LinkReader):
        return reader.outgoing_links(doc_id)
    return [LinkRow(*r) for r in _sqlite(reader).query(
        "SELECT l.idx, l.target, l.kind, d.doc_id, d.title, d.external_id, d.source "
        "FROM links l LEFT JOIN doc_keys k ON k.key = l.key "
        "LEFT JOIN documents d ON d.doc_id = k.doc_id "
        "WHERE l.doc_id = ? ORDER BY l.idx, d.doc_id", (doc_id,))]


def incoming(reader: Reader, doc_id: int, limit: int = MAX_INCOMING) -> list[Linker]:
    """Documents that link to this one (itself left out), by doc_id."""
    if isinstance(reader, LinkReader):
        return reader.incoming_links(doc_id, limit)
    return [Linker(*r) for r in _sqlite(reader).query(
        "SELECT DISTINCT d.doc_id, d.title, d.external_id, d.source FROM doc_keys k "
        "JOIN links l ON l.key = k.key JOIN documents d ON d.doc_id = l.doc_id "
        "WHERE k.doc_id = ? AND l.doc_id != ? ORDER BY d.doc_id LIMIT ?",
        (doc_id, doc_id, limit))]


def _sqlite(reader: Reader) -> SqliteReader:
    if not isinstance(reader, SqliteReader):
        raise NotSupported(f"links are not kept by {type(reader).__name__}")
    return reader
