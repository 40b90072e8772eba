"""Which documents a search or a listing may return, as SQL over `documents d` in `?` style
(store/reads.py runs it), and what each store writes its own way (its engine's filters.py).

Every condition runs inside the database: a filter that keeps 1% of the index selects that
1% first, and both retrievers then search only its chunks, so `top_k` results come back
whenever that many exist. Values are checked before they get here (search/filters.py); keys of
metadata fields hold no quotes or backslashes.

Metadata fields are looked up in what a tool gave (`metadata`) and, where it names no such
field, in the document's own properties (front matter, PDF and Office properties). A field
holding a list matches when any of its items does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal, NamedTuple

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


class Dialect(NamedTuple):
    """How one store writes the parts of a shared statement that differ (in `?` style)."""

    ids: Callable[[str, Sequence[int]], tuple[str, Any]]  # `column` is one of the ids
    compare: Callable[[Compare], tuple[str, list[Any]]]  # one metadata condition
    json: str  # what reads a JSON column as text (nothing where it is text)
    waiting: str  # a chunk whose vector has not come, as a condition on `chunks`
    vector: str  # the column of `chunks` the reader's `stored_vector` takes


def _tags(tags: tuple[str, ...]) -> tuple[str, list[Any]]:
    """Any of `tags`, each with every tag below it (`project` matches `project/apollo`), by
    the index of doc_tags."""
    parts, args = [], list[Any]()
    for tag in tags:
        low = tag.lower()
        # "0" follows "/": the range holds exactly the tags that start with "low/".
        parts.append("(tag = ? OR (tag >= ? AND tag < ?))")
        args += [low, low + "/", low + "0"]
    return f"d.doc_id IN (SELECT doc_id FROM doc_tags WHERE {' OR '.join(parts)})", args


def conditions(f: DocFilter, d: Dialect) -> tuple[str, list[Any]]:
    """SQL conditions over `documents d`, each starting with AND, and their arguments."""
    parts: list[str] = []
    args: list[Any] = []
    if f.doc_ids is not None:
        sql, arg = d.ids("d.doc_id", f.doc_ids)
        parts.append(sql)
        args.append(arg)
    if f.library is not None:
        parts.append("d.library = ?")
        args.append(f.library)
    for column, bound, sign in (("modified", f.modified_after, ">="),
                                ("modified", f.modified_before, "<"),
                                ("created", f.created_after, ">="),
                                ("created", f.created_before, "<")):
        if bound is not None:
            parts.append(f"d.{column} {sign} ?")
            args.append(bound)
    for sql, more in [*([_tags(f.tags_any)] if f.tags_any else []),
                      *(_tags((tag,)) for tag in f.tags_all),
                      *(d.compare(c) for c in f.metadata)]:
        parts.append(sql)
        args += more
    return "".join(f" AND {p}" for p in parts), args
