"""The `links` view of a document: the notes it links to and the notes linking to it."""

from __future__ import annotations

from pocketmcp.core.paths import path_of
from pocketmcp.errors import NotFound
from pocketmcp.ops.results import LinkedDocument, LinksResult, OutgoingLink
from pocketmcp.store import related
from pocketmcp.store.api import Reader, ReadIndex
from pocketmcp.store.rows import DocumentRow


async def links(index: ReadIndex, doc_id: int) -> LinksResult:
    def read(reader: Reader) -> tuple[DocumentRow | None, list[related.LinkRow],
                                           list[related.Linker]]:
        with reader.snapshot():
            row = reader.document(doc_id)
            if row is None:
                return None, [], []
            return row, reader.outgoing_links(doc_id), reader.incoming_links(doc_id)

    row, out_rows, in_rows = await index.run(read)
    if row is None:
        raise NotFound(f"no document with doc_id {doc_id}; search or list_documents gives ids")
    by_idx: dict[int, OutgoingLink] = {}
    for link in out_rows:  # one row per link and document it resolves to
        found = by_idx.setdefault(link.idx, OutgoingLink(
            target=link.target, kind=link.kind, documents=[]))  # type: ignore[arg-type]
        if link.doc_id is not None and link.title is not None and link.external_id is not None:
            found.documents.append(LinkedDocument(
                doc_id=link.doc_id, title=link.title,
                path=path_of(link.external_id, link.source or "")))
    outgoing = list(by_idx.values())
    return LinksResult(
        doc_id=row.doc_id, title=row.title, path=path_of(row.external_id, row.source),
        outgoing=outgoing,
        incoming=[LinkedDocument(doc_id=r.doc_id, title=r.title,
                                 path=path_of(r.external_id, r.source)) for r in in_rows])
