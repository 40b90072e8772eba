"""Which documents a search or a listing may return: the conditions, which each store writes
as SQL over `documents d` (store/reads.py, and its engine's filters.py).

Every condition runs inside the database: a filter that keeps 1% of the index selects that
1% first, and both retrievers then search only its chunks, so `top_k` results come back
whenever that many exist. Values are checked before they get here (ops/filters.py); keys of
metadata fields hold no quotes or backslashes.

Metadata fields are looked up in what a tool gave (`metadata`) and, where it names no such
field, in the document's own properties (front matter, PDF and Office properties). A field
holding a list matches when any of its items does.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

Scalar = str | int | float | bool
Op = Literal["eq", "in", "gt", "gte", "lt", "lte", "exists"]


class Compare(msgspec.Struct, frozen=True):
    """One metadata condition: `key` `op` `value` (for `in` a tuple, for `exists` a bool)."""

    key: str
    op: Op
    value: Any


class DocFilter(msgspec.Struct, frozen=True, kw_only=True):
    """Conditions on documents, all of which must hold (None or empty: no condition)."""

    doc_ids: tuple[int, ...] | None = None
    library: str | None = None
    tags_any: tuple[str, ...] = ()  # at least one of these tags (or a tag below one)
    tags_all: tuple[str, ...] = ()  # every one of these
    modified_after: str | None = None  # stored dates (core/dates.py); after: inclusive
    modified_before: str | None = None  # before: exclusive
    created_after: str | None = None
    created_before: str | None = None
    metadata: tuple[Compare, ...] = ()

    def empty(self) -> bool:
        return self == DocFilter()
