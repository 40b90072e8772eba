"""A Postgres index as a place (store/api.py `Place`): what can be done with the schema a
`PgTarget` names. Naming one connects to nothing: psycopg (an optional dependency) and the
engine are imported by the methods that open a connection."""

from __future__ import annotations

import secrets
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from pocketmcp.core.identity import Identity
from pocketmcp.errors import NotSupported
from pocketmcp.store.folder import FOLDER_KEY, FolderRecord
from pocketmcp.store.pg.target import PgTarget, schema_of

if TYPE_CHECKING:
    from pocketmcp.store.pg.reads import PgIndex
    from pocketmcp.store.pg.writes import PgWriter


class PgPlace(PgTarget, frozen=True):
    def exists(self) -> bool:
        return self.identity() is not None  # made when its writer has recorded the model

    def identity(self) -> Identity | None:
        from pocketmcp.store.pg import reads  # psycopg: only with STORE=postgres

        return reads.recorded_identity(self)

    def folder(self) -> FolderRecord | None:
        from pocketmcp.store.pg import reads  # psycopg: only with STORE=postgres

        return FolderRecord.decode(reads.recorded_value(self, FOLDER_KEY))

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
        shutil.rmtree(self._home(), ignore_errors=True)

    def database(self, name: str) -> PgPlace:
        return msgspec.structs.replace(self, schema=schema_of(self.schema, name))

    def throwaway(self, folder: Path, file: Path | None = None) -> PgPlace:
        if file is not None:
            raise NotSupported("--index names a SQLite file; with STORE=postgres the eval "
                               "index is a schema of its own, dropped afterwards")
        return msgspec.structs.replace(
            self, schema=f"{self.schema[:20]}_eval_{secrets.token_hex(6)}")
