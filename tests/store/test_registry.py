"""Where each index file lives, and which names may name one."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.runtime import make_config

from pocketmcp.errors import InvalidRequest, NotFound
from pocketmcp.store.pg.place import PgPlace
from pocketmcp.store.registry import Registry, check_name
from pocketmcp.store.sqlite.place import SqlitePlace


def test_the_main_index_and_named_databases_have_their_own_files(tmp_path: Path) -> None:
    main = SqlitePlace(tmp_path / "index.db", tmp_path / "dbs")
    registry = Registry(main)
    assert registry.where(None) == main
    assert registry.where("notes_2-a") == SqlitePlace(tmp_path / "dbs" / "notes_2-a.db",
                                                      tmp_path / "dbs")
    with pytest.raises(NotFound, match="create_database"):
        registry.existing("notes")
    (tmp_path / "dbs").mkdir()
    (tmp_path / "dbs" / "notes.db").write_bytes(b"")
    assert registry.existing("notes") == SqlitePlace(tmp_path / "dbs" / "notes.db",
                                                     tmp_path / "dbs")


@pytest.mark.parametrize("name", ["../x", "a/b", "x.db", "", "a" * 65, "a b", "..", "café",
                                  "a\n", "/abs"])
def test_names_that_could_reach_another_file_are_refused(name: str) -> None:
    with pytest.raises(InvalidRequest, match="db_name"):
        check_name(name)


def test_named_postgres_databases_are_schemas_of_the_main_index_s_server(
        tmp_path: Path) -> None:
    config = make_config(tmp_path, {"STORE": "postgres", "PG_SCHEMA": "team",
                                    "DATABASE_URL": "postgresql://u@127.0.0.1:1/x",
                                    "PG_EF_SEARCH": "400"})
    registry = Registry(config.main_place())
    assert registry.where(None) == PgPlace(config.store.database_url, "team", 400)
    assert registry.where("Notes-1") == PgPlace(config.store.database_url, "team_db_Notes-1", 400)
    long = registry.where("x" * 64)
    assert isinstance(long, PgPlace) and len(long.schema) == 63
    assert long != registry.where("x" * 63 + "y")
    with pytest.raises(InvalidRequest, match="db_name"):
        registry.where("a b")
