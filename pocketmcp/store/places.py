"""Which store holds an index (STORE=sqlite|postgres): the one place that asks. Everything
that depends on it is a method of the `Place` it returns (store/api.py)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal

import msgspec

from pocketmcp.core.secret import Secret
from pocketmcp.store.pg.place import PgPlace
from pocketmcp.store.sqlite.place import SqlitePlace

if TYPE_CHECKING:  # numpy: a stdio bridge names the index's place and loads none of it
    from pocketmcp.store.api import Place


class StoreSettings(msgspec.Struct, frozen=True, kw_only=True):
    """Where the main index is, and what a Postgres index is made with."""

    store: Literal["sqlite", "postgres"] = "sqlite"
    sqlite_path: Path
    databases_dir: Path
    database_url: Secret | None = None
    pg_schema: str = "pocketmcp"
    pg_ef_search: int = 1000
    pg_hnsw_m: int = 16
    pg_hnsw_ef_construction: int = 64


def main_place(settings: StoreSettings) -> Place:
    """Where the main index is: its SQLite file, or its Postgres schema (PG_SCHEMA); its named
    databases are beside it (`Place.database`)."""
    if settings.store == "postgres":
        assert settings.database_url is not None  # config.load checks it for STORE=postgres
        return PgPlace(settings.database_url, settings.pg_schema, settings.pg_ef_search,
                       settings.pg_hnsw_m, settings.pg_hnsw_ef_construction)
    return SqlitePlace(settings.sqlite_path, settings.databases_dir)
