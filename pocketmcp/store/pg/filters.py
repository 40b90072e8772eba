"""Which documents a search or a listing may return, as SQL over `documents d` (Postgres):
the same conditions as the SQLite store's (store/filters.py), over jsonb.

A metadata field is read from what a tool gave (`metadata`) where it has the key, else from
the document's own properties; a field holding a list matches when any of its items does.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pocketmcp.store import filters
from pocketmcp.store.filters import Compare, Dialect, DocFilter

_SQL_OP = {"gt": ">", "gte": ">=", "lt": "<", "lte": "<="}
# The field's values, one row each: its items when it is a list.
_VALUES = ("jsonb_array_elements(CASE jsonb_typeof(f.v) WHEN 'array' THEN f.v "
           "ELSE jsonb_build_array(f.v) END)")
_FIELD = ("(SELECT CASE WHEN d.metadata ? %s THEN d.metadata -> %s "
          "ELSE d.properties -> %s END AS v) f")


def _tags_sql(tags: tuple[str, ...]) -> tuple[str, list[Any]]:
    parts, args = [], list[Any]()
    for tag in tags:
        low = tag.lower()
        # "0" follows "/": the range holds exactly the tags below `low` (byte order).
        parts.append("(tag = %s OR (tag >= %s AND tag < %s))")
        args += [low, low + "/", low + "0"]
    return (f"d.doc_id IN (SELECT doc_id FROM doc_tags WHERE {' OR '.join(parts)})", args)


def _compare_sql(c: Compare) -> tuple[str, list[Any]]:
    key = c.key
    if c.op == "exists":
        sql = "(d.metadata ? %s OR d.properties ? %s)"
        return (sql if c.value else f"NOT {sql}"), [key, key]
    head = f"EXISTS (SELECT 1 FROM {_FIELD}, {_VALUES} e WHERE "
    args: list[Any] = [key, key, key]
    if c.op == "in":
        return head + "e = ANY(%s::jsonb[]))", [*args, [json.dumps(v) for v in c.value]]
    if c.op == "eq":
        return head + "e = %s::jsonb)", [*args, json.dumps(c.value)]
    # A range compares numbers with numbers and text (dates) with text.
    op = _SQL_OP[c.op]
    if isinstance(c.value, str):
        return head + f"jsonb_typeof(e) = 'string' AND (e #>> '{{}}') COLLATE \"C\" {op} %s)", [
            *args, c.value]
    return head + f"jsonb_typeof(e) = 'number' AND (e #>> '{{}}')::numeric {op} %s)", [
        *args, c.value]


def _ids(doc_ids: Sequence[int]) -> tuple[str, Any]:
    return "d.doc_id = ANY(%s)", list(doc_ids)


POSTGRES = Dialect("%s", _ids, _tags_sql, _compare_sql)


def where(f: DocFilter) -> tuple[str, list[Any]]:
    """SQL conditions over `documents d`, each starting with AND, and their arguments."""
    return filters.where(f, POSTGRES)
