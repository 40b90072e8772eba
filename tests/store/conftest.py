"""The store under test, each in turn: SQLite files, then Postgres with pgvector."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support.records import DIM, IDENTITY

from pocketmcp.core.secret import Secret
from pocketmcp.store.api import Place, ReadIndex, StoreWriter
from pocketmcp.store.pg.place import PgPlace
from pocketmcp.store.sqlite.place import SqlitePlace


@pytest.fixture(params=["sqlite", "postgres"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> Place:
    if request.param == "sqlite":
        return SqlitePlace(tmp_path / "index.db", tmp_path / "databases")
    url = request.getfixturevalue("pg_url")
    return PgPlace(Secret(url), request.getfixturevalue("pg_schema"))


@pytest.fixture
def store(where: Place) -> Iterator[tuple[StoreWriter, ReadIndex]]:
    """A writer (under the test identity) and a reader of the same index."""
    writer = where.writer(IDENTITY)
    index = where.reader(DIM)
    try:
        yield writer, index
    finally:
        index.close()
        writer.close()
