"""Each chunk's lines (and a PDF's pages) in its document's text, stored with the chunk when
it is written, so that a match says where it is without counting through its document at
search time (a count through a 1 MB text costs about 20 ms, bench/citations.py). The same
rows for both stores, from the writers and from the migrations that fill in older indexes.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from pocketmcp.core.text import has_pages, places

# Run with each store's own placeholders (`?` here).
UPDATE = ("UPDATE chunks SET start_line = ?, end_line = ?, start_page = ?, end_page = ? "
          "WHERE doc_id = ? AND idx = ?")
COLUMNS = ("start_line", "end_line", "start_page", "end_page")


def rows(doc_id: int, external_id: str, source: str, content: str,
         spans: Sequence[tuple[int, int, int]]) -> list[tuple[Any, ...]]:
    """UPDATE's rows for a document's chunks, given as (idx, start_off, end_off)."""
    found = places(content, [(start, end) for _, start, end in spans],
                   pages=has_pages(external_id, source, content))
    return [(*place, doc_id, idx) for place, (idx, _, _) in zip(found, spans, strict=True)]


def fill(documents: Iterable[tuple[int, str, str, str]],
         spans_of: Any, update: Any) -> None:
    """Every chunk's lines, for an index written before they were stored: `documents`
    yields (doc_id, external_id, source, content), `spans_of(doc_id)` a document's chunks
    as (idx, start_off, end_off), `update(rows)` writes UPDATE's rows."""
    for doc_id, external_id, source, content in documents:
        spans = [(int(i), int(s), int(e)) for i, s, e in spans_of(doc_id)]
        if spans:
            update(rows(doc_id, external_id, source, content, spans))
