"""Links between documents, resolved when read: a link points at every document that has
its key (store/facts.py), whichever of the two was indexed first. Every store's reader
answers with these rows (`Reader.outgoing_links`, `Reader.incoming_links`)."""

from __future__ import annotations

import msgspec

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
