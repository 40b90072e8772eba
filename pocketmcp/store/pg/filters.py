"""What Postgres writes its own way in the statements both stores share (store/reads.py,
in `?` style): the same conditions on metadata fields as SQLite's
(store/sqlite/filters.py), over jsonb; id lists as arrays; and which chunks wait for their
vectors.

A metadata field is read from what a tool gave (`metadata`) where it has the key, else from
the document's own properties; a field holding a list matches when any of its items does.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pocketmcp.store.filters import Compare, Dialect

_SQL_OP = {"gt": ">", "gte": ">=", "lt": "<", "lte": "<="}
# The field's values, one row each: its items when it is a list.
_VALUES = ("jsonb_array_elements(CASE jsonb_typeof(f.v) WHEN 'array' THEN f.v "
           "ELSE jsonb_build_array(f.v) END)")
# jsonb_exists: the `?` operator, written as its function (`?` marks arguments here).
_FIELD = ("(SELECT CASE WHEN jsonb_exists(d.metadata, ?) THEN d.metadata -> ? "
          "ELSE d.properties -> ? END AS v) f")


def _ids(column: str, ids: Sequence[int]) -> tuple[str, Any]:
    return f"{column} = ANY(?)", list(ids)


def _compare_sql(c: Compare) -> tuple[str, list[Any]]:
    key = c.key
    if c.op == "exists":
        sql = "(jsonb_exists(d.metadata, ?) OR jsonb_exists(d.properties, ?))"
        return (sql if c.value else f"NOT {sql}"), [key, key]
    head = f"EXISTS (SELECT 1 FROM {_FIELD}, {_VALUES} e WHERE "
    args: list[Any] = [key, key, key]
    if c.op == "in":
        return head + "e = ANY(?::jsonb[]))", [*args, [json.dumps(v) for v in c.value]]
    if c.op == "eq":
        return head + "e = ?::jsonb)", [*args, json.dumps(c.value)]
    # A range compares numbers with numbers and text (dates) with text.
    op = _SQL_OP[c.op]
    if isinstance(c.value, str):
        return head + f"jsonb_typeof(e) = 'string' AND (e #>> '{{}}') COLLATE \"C\" {op} ?)", [
            *args, c.value]
    return head + f"jsonb_typeof(e) = 'number' AND (e #>> '{{}}')::numeric {op} ?)", [
        *args, c.value]


POSTGRES = Dialect(_ids, _compare_sql, json="::text", waiting="embedding IS NULL",
                   vector="embedding")
