"""Which store holds an index (STORE=sqlite|postgres), and opening its reading side.

The writing side opens in pipeline/writer.py (the writer actor alone imports the writers).
Postgres modules are imported only when STORE=postgres: psycopg is an optional dependency.
"""

from __future__ import annotations

from pathlib import Path

from pocketmcp.config import Config
from pocketmcp.core.identity import Identity
from pocketmcp.store.api import ReadIndex
from pocketmcp.store.pg.place import PgPlace, place_of
from pocketmcp.store.sqlite.reads import SqliteIndex
from pocketmcp.store.sqlite.reads import recorded_identity as sqlite_identity

Where = Path | PgPlace  # an index file, or a Postgres schema


def main_index(config: Config) -> Where:
    """Where the main index is."""
    return place_of(config) if config.store == "postgres" else config.sqlite_path


def read_index(where: Where, dim: int, *, root: Path | None = None) -> ReadIndex:
    """The index at `where` for searching and listing."""
    if isinstance(where, PgPlace):
        from pocketmcp.store.pg.reads import PgIndex  # psycopg: only with STORE=postgres

        return PgIndex(where, dim, root=root)
    return SqliteIndex(where, dim, root=root)


def recorded_identity(where: Where) -> Identity | None:
    """What the index records of its embeddings, if it exists (blocking)."""
    if isinstance(where, PgPlace):
        from pocketmcp.store.pg import reads  # psycopg: only with STORE=postgres

        return reads.recorded_identity(where)
    return sqlite_identity(where) if where.is_file() else None


def exists(where: Where) -> bool:
    """Whether a writer has made the index at `where` (blocking; on Postgres, one connection
    of its own)."""
    if isinstance(where, PgPlace):
        return recorded_identity(where) is not None
    return where.is_file()


def drop(place: PgPlace) -> None:
    """Remove a Postgres index with everything in it (blocking; eval's throwaway indexes)."""
    from pocketmcp.store.pg import schema  # psycopg: only with STORE=postgres

    schema.drop(place)
