"""Where a Postgres index is: the server (a secret URL: it may hold a password) and the
schema that holds its tables. Naming an index connects to nothing: psycopg (an optional
dependency) is imported by the methods that open a connection.

Each index (the main one and every named database) is a schema of one database: one pool of
connections serves all of them, creating or dropping one is a transactional statement of a
few milliseconds, each has its own tables and HNSW graph (so a library never searches through
another's vectors), and `pg_dump -n` backs up one alone. Separate databases would need a pool
each and statements that cannot run in a transaction.
"""

from __future__ import annotations

import hashlib
import secrets
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from pocketmcp.core.identity import Identity
from pocketmcp.core.secret import Secret
from pocketmcp.errors import NotSupported

if TYPE_CHECKING:
    from pocketmcp.store.pg.reads import PgIndex
    from pocketmcp.store.pg.writes import PgWriter


class PgPlace(msgspec.Struct, frozen=True):
    url: Secret
    schema: str
    ef_search: int = 1000  # PG_EF_SEARCH: HNSW candidates a vector search visits
    hnsw_m: int = 16  # PG_HNSW_M and PG_HNSW_EF_CONSTRUCTION: the graph of a new index
    hnsw_ef_construction: int = 64

    def describe(self) -> str:
        """For messages and logs: the schema, never the URL (it may hold a password)."""
        return f"postgres schema {self.schema}"

    def exists(self) -> bool:
        return self.identity() is not None  # made when its writer has recorded the model

    def identity(self) -> Identity | None:
        from pocketmcp.store.pg import reads  # psycopg: only with STORE=postgres

        return reads.recorded_identity(self)

    def reader(self, dim: int, *, root: Path | None = None) -> PgIndex:
        from pocketmcp.store.pg.reads import PgIndex  # psycopg: only with STORE=postgres

        return PgIndex(self, dim, root=root)

    def writer(self, identity: Identity, *, rebuild: bool = False) -> PgWriter:
        from pocketmcp.store.pg.writes import PgWriter  # psycopg: only with STORE=postgres

        return PgWriter(self, identity, rebuild=rebuild)

    def writer_held(self) -> bool:
        return False  # writers lock the documents they write, not the index

    def size(self) -> int:
        return 0  # the server's to tell: pg_total_relation_size of the schema's tables

    def holds(self, path: Path) -> bool:
        return False

    def backup(self, target: Path) -> int:
        raise NotSupported("backup copies a SQLite index file; back up a Postgres index with "
                           f"pg_dump -n {self.schema} (or the server's own backups), "
                           "or export it with `pocketmcp export FILE`")

    def drop(self) -> None:
        from pocketmcp.store.pg import schema  # psycopg: only with STORE=postgres

        schema.drop(self)

    def database(self, name: str) -> PgPlace:
        return msgspec.structs.replace(self, schema=schema_of(self.schema, name))

    def throwaway(self, folder: Path, file: Path | None = None) -> PgPlace:
        if file is not None:
            raise NotSupported("--index names a SQLite file; with STORE=postgres the eval "
                               "index is a schema of its own, dropped afterwards")
        return msgspec.structs.replace(
            self, schema=f"{self.schema[:20]}_eval_{secrets.token_hex(6)}")


MAX_IDENTIFIER = 63  # bytes in a Postgres name (NAMEDATALEN - 1); longer ones are cut


def schema_of(main: str, db_name: str) -> str:
    """The schema of named database `db_name` (a checked name: letters, digits, '_', '-')
    beside the main index's schema `main`: `<main>_db_<name>`, kept as written (quoted), so
    that `Notes` and `notes` stay apart as their SQLite files do. A name too long for a
    Postgres identifier keeps its start and gets a hash of the whole name instead of its
    end."""
    schema = f"{main}_db_{db_name}"
    if len(schema) <= MAX_IDENTIFIER:
        return schema
    digest = hashlib.sha256(db_name.encode()).hexdigest()[:12]
    return f"{schema[:MAX_IDENTIFIER - len(digest) - 1]}_{digest}"
