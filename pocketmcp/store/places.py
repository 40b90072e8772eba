"""Which store holds an index (STORE=sqlite|postgres): the one place that asks. Everything
that depends on it is a method of the `Place` it returns (store/api.py), or of the settings
that name it here."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import msgspec

from pocketmcp.core.secret import Secret
from pocketmcp.errors import ConfigError
from pocketmcp.store.pg.place import PgPlace
from pocketmcp.store.sqlite.place import SqlitePlace

if TYPE_CHECKING:  # numpy: a stdio bridge names the index's place and loads none of it
    from pocketmcp.store.api import Place


class StoreSettings(msgspec.Struct, frozen=True, kw_only=True):
    """Where the main index is, and what a Postgres index is made with."""

    store: Literal["sqlite", "postgres"] = "sqlite"
    sqlite_path: Path
    named_file: bool = False  # SQLITE_PATH named the file; else the folder rule chose it
    databases_dir: Path
    database_url: Secret | None = None
    pg_schema: str = "pocketmcp"
    pg_ef_search: int = 1000
    pg_hnsw_m: int = 16
    pg_hnsw_ef_construction: int = 64

    @property
    def named(self) -> bool:
        """Whether the settings name the index (a file, or a Postgres schema) rather than
        leave it to the folder rule."""
        return self.named_file or self.store == "postgres"

    def named_by(self) -> str:
        """The flag that names the index again on a command line (none for a schema)."""
        named = self.named_file and self.store == "sqlite"
        return f" --db {self.sqlite_path.resolve()}" if named else ""

    def indexes_into(self, file: Path) -> bool:
        """Whether a server told to keep its index in `file` (a client entry's) keeps this
        one: the same file as these settings name."""
        return file.absolute() == self.sqlite_path.absolute()

    def check(self) -> None:
        """ConfigError naming the variable when these settings cannot name an index."""
        if self.store == "postgres":
            url = self.database_url
            if url is None or not url.reveal().startswith(("postgresql://", "postgres://")):
                raise ConfigError("DATABASE_URL", "***" if url else "",
                                  "a postgresql:// URL when STORE=postgres")
        # A named database's schema is `<PG_SCHEMA>_db_<name>`: a PG_SCHEMA holding `_db_`,
        # or ending in `_db`, could be another PG_SCHEMA's database (`x_db_y` is database `y`
        # of `x`, `x_db` + `z` is database `db_z` of `x`), so neither is a PG_SCHEMA.
        schema = self.pg_schema
        if not re.fullmatch(r"[a-z_][a-z0-9_]{0,39}", schema) or "_db_" in schema + "_":
            raise ConfigError("PG_SCHEMA", schema,
                              "a lower-case name of letters, digits and _ (at most 40), "
                              "without `_db_` and not ending in `_db` (a named database's "
                              "schema is `<PG_SCHEMA>_db_<name>`)")
        if self.pg_hnsw_ef_construction < 2 * self.pg_hnsw_m:  # as pgvector requires
            raise ConfigError("PG_HNSW_EF_CONSTRUCTION", self.pg_hnsw_ef_construction,
                              f"at least twice PG_HNSW_M ({2 * self.pg_hnsw_m})")


def main_place(settings: StoreSettings) -> Place:
    """Where the main index is: its SQLite file, or its Postgres schema (PG_SCHEMA); its named
    databases are beside it (`Place.database`)."""
    if settings.store == "postgres":
        assert settings.database_url is not None  # StoreSettings.check for STORE=postgres
        return PgPlace(settings.database_url, settings.pg_schema, settings.pg_ef_search,
                       settings.pg_hnsw_m, settings.pg_hnsw_ef_construction)
    return SqlitePlace(settings.sqlite_path, settings.databases_dir)


def at_file(index: Path) -> Place:
    """The index kept in the file `index` (the folder rule's), its named databases in the
    folder `databases` beside it."""
    return SqlitePlace(index, index.parent / "databases")
