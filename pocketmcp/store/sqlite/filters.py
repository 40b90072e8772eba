"""What SQLite writes its own way in the statements both stores share (store/reads.py):
conditions on documents' metadata fields over JSON text, id lists as one JSON
argument, and which chunks wait for their vectors."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pocketmcp.store.filters import Compare, Dialect
from pocketmcp.store.sqlite.connect import id_list

_SQL_OP = {"eq": "=", "gt": ">", "gte": ">=", "lt": "<", "lte": "<="}
# Both JSON sources of a field: the tool's metadata where it has the key, else properties.
_FIELD = ("json_each(CASE WHEN json_type(d.metadata, ?) IS NULL THEN d.properties "
          "ELSE d.metadata END, ?)")


def _ids(column: str, ids: Sequence[int]) -> tuple[str, Any]:
    return f"{column} IN (SELECT value FROM json_each(?))", id_list(ids)


def _compare_sql(c: Compare) -> tuple[str, list[Any]]:
    path = '$."' + c.key + '"'  # quoted: keys may hold dots and spaces
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


SQLITE = Dialect(_ids, _compare_sql, json="", waiting="waiting = 1",
                vector="waiting")
