"""The indexes one process serves: the main index and the named databases beside it."""

from __future__ import annotations

import re

from pocketmcp.errors import InvalidRequest, NotFound
from pocketmcp.store.api import Place

_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


def check_name(name: str, what: str = "db_name") -> str:
    """`name` if it can name a database (and its file); InvalidRequest otherwise."""
    if _NAME.fullmatch(name) is None:
        shown = name if len(name) <= 80 else name[:80] + "..."
        raise InvalidRequest(f"{what} {shown!r} is not valid: use 1-64 letters, digits, "
                             "'_' or '-'")
    return name


class Registry:
    """Where each index lives: the main one, and each named database beside it, as the file
    `<name>.db` in the databases folder (SQLite) or as the schema `<PG_SCHEMA>_db_<name>` of
    the main index's Postgres database (store/pg/place.py)."""

    def __init__(self, main: Place) -> None:
        self.main = main

    def where(self, name: str | None) -> Place:
        """The main index for None, else database `name`'s place (which may not exist yet);
        InvalidRequest for a name that cannot name one. Touches nothing."""
        if name is None:
            return self.main
        return self.main.database(check_name(name))

    def existing(self, name: str | None) -> Place:
        """Like `where`, but NotFound for a database that was never created (blocking: on
        Postgres it asks the server)."""
        where = self.where(name)
        if name is not None and not where.exists():
            raise not_found(name)
        return where


def not_found(name: str) -> NotFound:
    return NotFound(f"no database named {name!r}; call create_database first, "
                    "or leave db_name out to use the main index")
