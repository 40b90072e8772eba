"""The index files one process serves: the main index and the named databases beside it."""

from __future__ import annotations

import re
from pathlib import Path

from pocketmcp.errors import InvalidRequest, NotFound, NotSupported

_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


def check_name(name: str, what: str = "db_name") -> str:
    """`name` if it can name a database (and its file); InvalidRequest otherwise."""
    if _NAME.fullmatch(name) is None:
        shown = name if len(name) <= 80 else name[:80] + "..."
        raise InvalidRequest(f"{what} {shown!r} is not valid: use 1-64 letters, digits, "
                             "'_' or '-'")
    return name


class Registry:
    """Where each index file lives: the main one, and `<name>.db` in the databases folder."""

    def __init__(self, main: Path, databases_dir: Path, *, postgres: bool = False) -> None:
        self.main = main
        self.databases_dir = databases_dir
        self.postgres = postgres  # STORE=postgres: no named databases yet

    def path(self, name: str | None) -> Path:
        """The main index for None, else database `name`'s file (which may not exist yet)."""
        if name is None:
            return self.main
        if self.postgres:
            raise NotSupported("named databases (db_name, create_database) are not supported "
                               "with STORE=postgres yet; they work on SQLite indexes")
        return self.databases_dir / f"{check_name(name)}.db"

    def existing(self, name: str | None) -> Path:
        """Like `path`, but NotFound for a database that was never created."""
        path = self.path(name)
        if name is not None and not path.is_file():
            raise NotFound(f"no database named {name!r}; call create_database first, "
                           "or leave db_name out to use the main index")
        return path
