"""Links between documents, resolved when read: a link points at every document that has
its key (store/facts.py), whichever of the two was indexed first."""

from __future__ import annotations

import msgspec

from pocketmcp.store.queries import IndexReader

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


def outgoing(reader: IndexReader, doc_id: int) -> list[LinkRow]:
    """A document's links in the order written, each with the documents it resolves to."""
    return [LinkRow(*r) for r in reader.query(
        "SELECT l.idx, l.target, l.kind, d.doc_id, d.title, d.external_id, d.source "
        "FROM links l LEFT JOIN doc_keys k ON k.key = l.key "
        "LEFT JOIN documents d ON d.doc_id = k.doc_id "
        "WHERE l.doc_id = ? ORDER BY l.idx, d.doc_id", (doc_id,))]


def incoming(reader: IndexReader, doc_id: int, limit: int = MAX_INCOMING) -> list[Linker]:
    """Documents that link to this one (itself left out), by doc_id."""
    return [Linker(*r) for r in reader.query(
        "SELECT DISTINCT d.doc_id, d.title, d.external_id, d.source FROM doc_keys k "
        "JOIN links l ON l.key = k.key JOIN documents d ON d.doc_id = l.doc_id "
        "WHERE k.doc_id = ? AND l.doc_id != ? ORDER BY d.doc_id LIMIT ?",
        (doc_id, doc_id, limit))]
