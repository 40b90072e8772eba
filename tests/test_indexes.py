"""Where an index lives (indexes.py): one per folder in the user data folder, and which one
a command told no folder means. Real index files, made by the SQLite store's writer."""

from __future__ import annotations

from pathlib import Path

import pytest

from pocketmcp import indexes
from pocketmcp.core.identity import Identity
from pocketmcp.store.folder import FolderRecord
from pocketmcp.store.sqlite.place import SqlitePlace


@pytest.fixture(autouse=True)
def data_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    return tmp_path / "data"


def _make(index: Path, folder: Path | None) -> Path:
    index.parent.mkdir(parents=True, exist_ok=True)
    writer = SqlitePlace(index, index.parent / "databases").writer(Identity(model="m", dim=4))
    try:
        if folder is not None:
            writer.record_folder(FolderRecord(path=str(folder.resolve())))
    finally:
        writer.close()
    return index


def test_each_folder_has_its_own_named_index_in_the_user_data_folder(
        tmp_path: Path, data_home: Path) -> None:
    notes = tmp_path / "My Notes"
    other = tmp_path / "elsewhere" / "My Notes"
    index = indexes.index_for(notes)
    assert index.is_relative_to(data_home / "pocketmcp" / "indexes")
    assert index.name == "index.db" and index.parent.name.startswith("My-Notes-")
    assert indexes.index_for(other) != index  # same name, another folder
    assert indexes.index_for(tmp_path / "elsewhere" / ".." / "My Notes") == index
    assert not index.parent.exists()  # naming creates nothing


def test_a_command_told_no_folder_takes_the_nearest_then_the_only_index(
        tmp_path: Path) -> None:
    notes, deep = tmp_path / "notes", tmp_path / "notes" / "a" / "b"
    deep.mkdir(parents=True)
    assert indexes.pick(deep) == (None, [])
    _make(indexes.index_for(notes), notes)
    found, _ = indexes.pick(deep)  # a folder above the current one
    assert found is not None and (found.index, found.folder) == (
        indexes.index_for(notes), notes.resolve())
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    found, every = indexes.pick(elsewhere)  # the only index of a folder
    assert found is not None and found.folder == notes.resolve()
    assert every == [(indexes.index_for(notes), notes.resolve())]
    _make(indexes.index_for(tmp_path / "no-folder"), None)  # a server's, tools alone
    found, every = indexes.pick(elsewhere)
    assert found is not None and found.folder == notes.resolve() and len(every) == 2
    tea = elsewhere / "tea"
    tea.mkdir()
    _make(indexes.index_for(tea), tea)
    found, _ = indexes.pick(elsewhere)  # the only one of a folder inside the current one
    assert found is not None and found.folder == tea.resolve()
    found, every = indexes.pick(tmp_path / "notes" / ".." / "nowhere")
    assert found is None and len(every) == 3  # two indexes of folders: name one


def test_each_index_keeps_its_own_files_in_a_folder_of_its_own(
        tmp_path: Path, data_home: Path) -> None:
    from pocketmcp.core.secret import Secret
    from pocketmcp.store.pg.place import PgPlace
    from pocketmcp.store.places import at_file

    index = tmp_path / "notes" / "index.db"
    assert at_file(index).beside("token") == tmp_path / "notes" / "index.db.token"
    assert at_file(index).beside("server.json").name == "index.db.server.json"

    def pg(url: str, schema: str = "team") -> PgPlace:
        return PgPlace(Secret(url), schema)

    token = pg("postgresql://me:pw@db.lan:5432/kb").beside("token")
    assert token.parent.parent == data_home / "pocketmcp" / "postgres"
    assert token.parent.name.startswith("team-") and token.name == "token"
    assert token.parent.stat().st_mode & 0o777 == 0o700
    assert pg("postgresql://me:new-pw@db.lan:5432/kb").beside("token") == token  # password
    assert pg("postgresql://me:pw@db.lan:5432/kb", "other").beside("token") != token
    assert pg("postgresql://me:pw@elsewhere:5432/kb").beside("token") != token
    # Connection parameters but the socket's folder name no other server: they keep it too.
    assert pg("postgresql://me:pw@db.lan:5432/kb?sslmode=require&password=x").beside(
        "token") == token
    assert pg("postgresql://me@/kb?host=/run/postgresql").beside("token") != pg(
        "postgresql://me@/kb?host=/tmp/pg").beside("token")


def test_naming_a_postgres_index_file_never_fails_where_its_folder_cannot_be_made(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pocketmcp.core.secret import Secret
    from pocketmcp.store.pg.place import PgPlace

    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    monkeypatch.setenv("XDG_DATA_HOME", str(blocked))
    cache = PgPlace(Secret("postgresql://me:pw@db.lan:5432/kb"), "team").beside("ocr")
    assert cache.is_relative_to(blocked) and not cache.parent.exists()
