"""Where a Postgres index is, as data: the server (a secret URL: it may hold a password), the
schema that holds its tables, and what its HNSW graph is made with. What the engine's modules
take; the index place (place.py) adds what can be done with it.

Each index (the main one and every named database) is a schema of one database: one pool of
connections serves all of them, creating or dropping one is a transactional statement of a
few milliseconds, each has its own tables and HNSW graph (so a library never searches through
another's vectors), and `pg_dump -n` backs up one alone. Separate databases would need a pool
each and statements that cannot run in a transaction.
"""

from __future__ import annotations

import contextlib
import hashlib
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import msgspec

from pocketmcp import private
from pocketmcp.core.secret import Secret
from pocketmcp.store.home import data_dir


class PgTarget(msgspec.Struct, frozen=True):
    url: Secret
    schema: str
    ef_search: int = 1000  # PG_EF_SEARCH: HNSW candidates a vector search visits
    hnsw_m: int = 16  # m and ef_construction: the HNSW graph of a new index
    hnsw_ef_construction: int = 64

    def describe(self) -> str:
        """For messages and logs: the schema, never the URL (it may hold a password)."""
        return f"postgres schema {self.schema}"

    def key(self) -> str:
        """Names this index among those of every server (its URL hashed: no secret)."""
        server = hashlib.sha256(self.url.reveal().encode()).hexdigest()[:16]
        return f"{server}/{self.schema}"

    def _home(self) -> Path:
        """The folder of this index's own files: named by its schema and its server (user,
        host, port, database, and a socket's folder given as `?host=`; the password and the
        other connection parameters left out, so that changing them keeps them)."""
        parts = urlsplit(self.url.reveal())
        user, _, host = parts.netloc.rpartition("@")
        socket = parse_qs(parts.query).get("host", [""])[0]
        server = f"{user.partition(':')[0]}@{host}{parts.path}?host={socket}"
        digest = hashlib.sha256(server.encode()).hexdigest()[:12]
        return data_dir() / "postgres" / f"{self.schema}-{digest}"

    def own_files(self) -> list[Path]:
        home = self._home()
        with contextlib.suppress(OSError):
            return [home, *sorted(home.iterdir())]
        return []

    def beside(self, name: str) -> Path:
        home = self._home()
        # Made private when first named; a folder that cannot be made fails the file's own
        # write later (the OCR cache then reads images again), not the naming.
        with contextlib.suppress(OSError):
            private.folder(home)
        return home / name


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
