"""Which store holds an index (STORE=sqlite|postgres): the one place that asks. Everything
that depends on it is a method of the `Place` it returns (store/api.py), or of the settings
that name it here."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, ClassVar, Literal

import msgspec

from pocketmcp.core.secret import Secret
from pocketmcp.errors import ConfigError
from pocketmcp.settings import ON_AN_INDEX, Setting
from pocketmcp.store.pg.place import PgPlace
from pocketmcp.store.sqlite.place import SqlitePlace

if TYPE_CHECKING:  # numpy: a stdio bridge names the index's place and loads none of it
    from pocketmcp.store.api import Place


class StoreSettings(msgspec.Struct, frozen=True, kw_only=True):
    """Where the main index is, and what a Postgres index is made with."""

    USED_BY: ClassVar = (*ON_AN_INDEX, "eval")

    store: Annotated[Literal["sqlite", "postgres"], Setting("STORE",
        help="Where the index lives. sqlite: one file (SQLITE_PATH) on this machine. "
             "postgres: a Postgres server with pgvector (DATABASE_URL), which several "
             "PocketMCP processes on several machines may read and write at once.")] = "sqlite"
    sqlite_path: Annotated[Path | None, Setting("SQLITE_PATH", flag="--db", used_by=ON_AN_INDEX,
        help="SQLite file holding the index (created with its folder if missing; the "
             "databases the create_database tool makes are in a folder `databases` beside "
             "it). Unset: the folder's own index in the user data folder, e.g. "
             "~/.local/share/pocketmcp/indexes/notes-1a2b3c4d5e/index.db; commands told no "
             "folder take the current directory's index, or the only one.")] = None
    database_url: Annotated[Secret | None, Setting("DATABASE_URL",
        help="The Postgres server of STORE=postgres, as "
             "postgresql://user:password@host:5432/db (libpq's form; ?host=/run/postgresql "
             "for a Unix socket). It holds a password: environment only, never a flag, and "
             "never logged.")] = None
    pg_schema: Annotated[str, Setting("PG_SCHEMA",
        help="The Postgres schema holding the main index (created if missing); each named "
             "database is a schema of its own beside it, `<PG_SCHEMA>_db_<name>`, so a "
             "PG_SCHEMA may not hold `_db_` or end in `_db`.")] = "pocketmcp"
    pg_ef_search: Annotated[int, Setting("PG_EF_SEARCH", minimum=10, maximum=1000,
        used_by=("serve", "search", "check-search", "eval"),
        help="Candidates a Postgres vector search visits in the HNSW graph (pgvector's "
             "hnsw.ef_search; never fewer than the results asked for). More finds more of "
             "the truly nearest chunks and takes longer: recall@10 0.92 at 200 and 0.99 at "
             "1000 on 200,000 chunks, 0.90 at 1000 on 1,000,000 (README, "
             "Postgres).")] = 1000
    # Constants: the HNSW graph of a new Postgres index (pgvector's m and ef_construction).
    pg_hnsw_m: int = 16
    pg_hnsw_ef_construction: int = 64
    named_file: bool = False  # SQLITE_PATH named the file; else the folder rule chose it

    @property
    def named(self) -> bool:
        """Whether the settings name the index (a file, or a Postgres schema) rather than
        leave it to the folder rule."""
        return self.named_file or self.store == "postgres"

    def by_rule(self, rule: Callable[[], Path]) -> StoreSettings:
        """These settings with the folder rule's file (`rule()`) unless SQLITE_PATH names
        one."""
        if self.sqlite_path is not None:
            return msgspec.structs.replace(self, named_file=True)
        return msgspec.structs.replace(self, sqlite_path=rule())

    def with_file(self, index: Path) -> StoreSettings:
        """These settings on the index in the file `index`, kept by the folder rule."""
        return msgspec.structs.replace(self, sqlite_path=index)

    def named_by(self) -> str:
        """The flag that names the index again on a command line (none for a schema)."""
        named = self.named_file and self.store == "sqlite"
        return f" --db {self._file().resolve()}" if named else ""

    def indexes_into(self, file: Path) -> bool:
        """Whether a server told to keep its index in `file` (a client entry's) keeps this
        one: the same file as these settings name."""
        return file.absolute() == self._file().absolute()

    def _file(self) -> Path:
        assert self.sqlite_path is not None  # config.load applies the rule (by_rule)
        return self.sqlite_path

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


def main_place(settings: StoreSettings) -> Place:
    """Where the main index is: its SQLite file, or its Postgres schema (PG_SCHEMA); its named
    databases are beside it (`Place.database`)."""
    if settings.store == "postgres":
        assert settings.database_url is not None  # StoreSettings.check for STORE=postgres
        return PgPlace(settings.database_url, settings.pg_schema, settings.pg_ef_search,
                       settings.pg_hnsw_m, settings.pg_hnsw_ef_construction)
    return at_file(settings._file())


def at_file(index: Path) -> Place:
    """The index kept in the file `index`, its named databases in the folder `databases`
    beside it."""
    return SqlitePlace(index, index.parent / "databases")
