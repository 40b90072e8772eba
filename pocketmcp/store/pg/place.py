"""Where a Postgres index is: the server (a secret URL: it may hold a password) and the
schema that holds its tables. No psycopg here: naming an index connects to nothing.

Each index (the main one and every named database) is a schema of one database: one pool of
connections serves all of them, creating or dropping one is a transactional statement of a
few milliseconds, each has its own tables and HNSW graph (so a library never searches through
another's vectors), and `pg_dump -n` backs up one alone. Separate databases would need a pool
each and statements that cannot run in a transaction.
"""

from __future__ import annotations

import hashlib

import msgspec

from pocketmcp.config import Config
from pocketmcp.core.secret import Secret


class PgPlace(msgspec.Struct, frozen=True):
    url: Secret
    schema: str
    ef_search: int = 1000  # PG_EF_SEARCH: HNSW candidates a vector search visits
    hnsw_m: int = 16  # PG_HNSW_M and PG_HNSW_EF_CONSTRUCTION: the graph of a new index
    hnsw_ef_construction: int = 64

    def describe(self) -> str:
        """For messages and logs: the schema, never the URL (it may hold a password)."""
        return f"postgres schema {self.schema}"


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


def place_of(config: Config, db_name: str | None = None) -> PgPlace:
    """The main index's schema (PG_SCHEMA), or named database `db_name`'s beside it."""
    assert config.database_url is not None  # config.load checks it for STORE=postgres
    schema = config.pg_schema if db_name is None else schema_of(config.pg_schema, db_name)
    return PgPlace(config.database_url, schema, config.pg_ef_search, config.pg_hnsw_m,
                   config.pg_hnsw_ef_construction)
