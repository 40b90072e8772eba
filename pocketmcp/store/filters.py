"""Which documents a search or a listing may return, as SQL over `documents d`.

Every condition runs inside the database: a filter that keeps 1% of the index selects that
1% first, and both retrievers then search only its chunks, so `top_k` results come back
whenever that many exist. Values are checked before they get here (ops/filters.py); keys of
metadata fields hold no quotes or backslashes.

Metadata fields are looked up in what a tool gave (`metadata`) and, where it names no such
field, in the document's own properties (front matter, PDF and Office properties). A field
holding a list matches when any of its items does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal, NamedTuple

import msgspec

from pocketmcp.store.sqlite.connect import id_list

Scalar = str | int | float | bool
Op = Literal["eq", "in", "gt", "gte", "lt", "lte", "exists"]
_SQL_OP = {"eq": "=", "gt": ">", "gte": ">=", "lt": "<", "lte": "<="}
# Both JSON sources of a field: the tool's metadata where it has the key, else properties.
_FIELD = ("json_each(CASE WHEN json_type(d.metadata, ?) IS NULL THEN d.properties "
          "ELSE d.metadata END, ?)")


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


def _tag(tag: str) -> tuple[str, list[Any]]:
    """A tag and every tag below it (`project` matches `project/apollo`), by the index."""
    low = tag.lower()
    # "0" follows "/": the range holds exactly the tags that start with "low/".
    return "(tag = ? OR (tag >= ? AND tag < ?))", [low, low + "/", low + "0"]


def _tags_sql(tags: tuple[str, ...]) -> tuple[str, list[Any]]:
    parts, args = [], list[Any]()
    for tag in tags:
        sql, more = _tag(tag)
        parts.append(sql)
        args += more
    return f"d.doc_id IN (SELECT doc_id FROM doc_tags WHERE {' OR '.join(parts)})", args


def _path(key: str) -> str:
    return '$."' + key + '"'  # quoted: keys may hold dots and spaces


def _compare_sql(c: Compare) -> tuple[str, list[Any]]:
    path = _path(c.key)
    if c.op == "exists":
        sql = ("(json_type(d.metadata, ?) IS NOT NULL OR json_type(d.properties, ?) "
               "IS NOT NULL)")
        return (sql if c.value else f"NOT {sql}"), [path, path]
    if c.op == "in":
        marks = ",".join("?" * len(c.value))
        return f"EXISTS (SELECT 1 FROM {_FIELD} WHERE value IN ({marks}))", [
            path, path, *c.value]
    if c.op == "eq":
        return f"EXISTS (SELECT 1 FROM {_FIELD} WHERE value = ?)", [path, path, c.value]
    # A range compares numbers with numbers and text (dates) with text.
    kinds = "'text'" if isinstance(c.value, str) else "'integer', 'real'"
    return (f"EXISTS (SELECT 1 FROM {_FIELD} WHERE type IN ({kinds}) "
            f"AND value {_SQL_OP[c.op]} ?)", [path, path, c.value])


class Dialect(NamedTuple):
    """How one store writes the conditions `where` puts together."""

    mark: str  # an argument's placeholder
    ids: Callable[[Sequence[int]], tuple[str, Any]]  # doc_ids: the condition, its argument
    tags: Callable[[tuple[str, ...]], tuple[str, list[Any]]]
    compare: Callable[[Compare], tuple[str, list[Any]]]


def where(f: DocFilter, dialect: Dialect | None = None) -> tuple[str, list[Any]]:
    """SQL conditions over `documents d`, each starting with AND, and their arguments (in
    SQLite's dialect unless another is given)."""
    d = dialect or SQLITE
    parts: list[str] = []
    args: list[Any] = []
    if f.doc_ids is not None:
        sql, arg = d.ids(f.doc_ids)
        parts.append(sql)
        args.append(arg)
    if f.library is not None:
        parts.append(f"d.library = {d.mark}")
        args.append(f.library)
    for column, bound, sign in (("modified", f.modified_after, ">="),
                                ("modified", f.modified_before, "<"),
                                ("created", f.created_after, ">="),
                                ("created", f.created_before, "<")):
        if bound is not None:
            parts.append(f"d.{column} {sign} {d.mark}")
            args.append(bound)
    for sql, more in [*([d.tags(f.tags_any)] if f.tags_any else []),
                      *(d.tags((tag,)) for tag in f.tags_all),
                      *(d.compare(c) for c in f.metadata)]:
        parts.append(sql)
        args += more
    return "".join(f" AND {p}" for p in parts), args


def _ids(doc_ids: Sequence[int]) -> tuple[str, Any]:
    return "d.doc_id IN (SELECT value FROM json_each(?))", id_list(doc_ids)


SQLITE = Dialect("?", _ids, _tags_sql, _compare_sql)
