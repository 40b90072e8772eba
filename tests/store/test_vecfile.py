"""The vector file beside an index: kept in step by the writer, checked on open, and
repaired from SQLite while searches stay right."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pytest

from pocketmcp.core.identity import Identity
from pocketmcp.core.text import sha256
from pocketmcp.messages import Chunk, DocRecord
from pocketmcp.store.sqlite.connect import open_sync_writer
from pocketmcp.store.sqlite.queries import SqliteReader
from pocketmcp.store.sqlite.vectors.file import Layout, open_columns, vectors_path
from pocketmcp.store.sqlite.vectors.index import VectorIndex
from pocketmcp.store.sqlite.writes import SqliteWriter

DIM = 32
ROOT = Path(__file__).resolve().parents[2]


def _unit(n: int, seed: int) -> np.ndarray:
    rows = np.random.default_rng(seed).normal(size=(n, DIM)) + 1.0
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def _add(writer: SqliteWriter, first: int, docs: int, seed: int) -> None:
    vectors = _unit(docs * 2, seed)
    writer.begin()
    for d in range(first, first + docs):
        chunks = tuple(Chunk(idx=i, start=i, end=i + 1, text=f"d{d}c{i}", tokens=2,
                             sha256=sha256(f"d{d}c{i}")) for i in range(2))
        writer.upsert(DocRecord(external_id=f"d{d}", source="raw", uri=None, title="",
                                content="xx", sha256=str(d)),
                      chunks, vectors[(d - first) * 2:(d - first) * 2 + 2].tobytes())
    writer.commit()


def _delete(writer: SqliteWriter, docs: Iterable[int]) -> None:
    writer.begin()
    for d in docs:
        writer.delete(f"d{d}")
    writer.commit()


def _searches(db: Path) -> tuple[list[list[int]], list[list[int]], str | None]:
    """(found, exact) chunk ids for a few queries, and why SQLite answered (None: the file
    did), from a new VectorIndex as another process would open it."""
    reader = SqliteReader(db)
    try:
        rows = reader._rows("SELECT chunk_id, embedding FROM vec_chunks")
        ids = np.asarray([r[0] for r in rows], np.int64)
        vectors = np.frombuffer(b"".join(bytes(r[1]) for r in rows), np.float32).reshape(
            -1, DIM)
        index = VectorIndex(db, DIM)
        try:
            found, exact = [], []
            for q in _unit(5, seed=99):
                got, _, _ = index.search(reader.log, q, 5, candidates=100)
                found.append(sorted(got.tolist()))
                exact.append(sorted(ids[np.argsort(-(vectors @ q))[:5]].tolist()))
            return found, exact, index.reason
        finally:
            index.close()
    finally:
        reader.close()


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "index.db"
    writer = SqliteWriter(path, Identity(model="m", dim=DIM))
    try:
        _add(writer, 0, 200, seed=1)
        _delete(writer, range(0, 20))
    finally:
        writer.close()
    return path


def test_each_commit_reaches_the_file_and_a_new_reader_searches_it(db: Path) -> None:
    found, exact, reason = _searches(db)
    assert reason is None
    assert found == exact
    cols = open_columns(vectors_path(db), DIM)
    state = cols.state()
    assert state is not None and state.live == 360  # 200 documents of 2, 20 removed


def _repair(db: Path) -> None:
    writer = SqliteWriter(db, Identity(model="m", dim=DIM))
    try:
        writer.repair_vectors()
    finally:
        writer.close()


def test_a_damaged_file_is_answered_from_sqlite_until_the_writer_rebuilds_it(
        db: Path) -> None:
    path = vectors_path(db)
    cols = open_columns(path, DIM)
    slots = Layout.of(DIM, cols.capacity).slots
    with open(path, "r+b") as handle:  # both state slots torn
        handle.seek(slots)
        handle.write(b"\xff" * 128)
    found, exact, reason = _searches(db)
    assert reason is not None and "slot" in reason
    assert found == exact  # from sqlite-vec's exact scan meanwhile
    _repair(db)
    found, exact, reason = _searches(db)
    assert reason is None
    assert found == exact


def test_a_file_of_another_database_is_never_used(db: Path, tmp_path: Path) -> None:
    other = tmp_path / "other" / "index.db"
    writer = SqliteWriter(other, Identity(model="m", dim=DIM))
    try:
        _add(writer, 0, 200, seed=7)
    finally:
        writer.close()
    shutil.copy(vectors_path(other), vectors_path(db))
    found, exact, reason = _searches(db)
    assert reason is not None and "another database" in reason
    assert found == exact
    _repair(db)
    assert _searches(db)[2] is None


def test_a_file_left_behind_by_a_crash_is_followed_through_the_log_then_caught_up(
        db: Path, tmp_path: Path) -> None:
    saved = tmp_path / "saved.vectors"
    shutil.copy(vectors_path(db), saved)
    writer = SqliteWriter(db, Identity(model="m", dim=DIM))
    try:
        _add(writer, 500, 30, seed=3)
        _delete(writer, range(20, 60))
    finally:
        writer.close()
    shutil.copy(saved, vectors_path(db))  # as if the writer died before updating the file
    found, exact, reason = _searches(db)
    assert reason is None  # the file, with the log past it
    assert found == exact
    writer = SqliteWriter(db, Identity(model="m", dim=DIM))  # replays the log on open
    try:
        state = writer.vectors.state
        assert state is not None and state.live == 360 + 60 - 80
    finally:
        writer.close()


def test_a_file_further_behind_than_the_trimmed_log_is_rebuilt(db: Path,
                                                               tmp_path: Path) -> None:
    saved = tmp_path / "saved.vectors"
    shutil.copy(vectors_path(db), saved)
    writer = SqliteWriter(db, Identity(model="m", dim=DIM))
    try:
        _add(writer, 500, 30, seed=3)
        writer._sql("DELETE FROM chunk_log")  # as trimming does, much later
    finally:
        writer.close()
    shutil.copy(saved, vectors_path(db))
    found, exact, reason = _searches(db)
    assert reason is not None
    assert found == exact
    _repair(db)
    found, exact, reason = _searches(db)
    assert reason is None
    assert found == exact


@pytest.mark.timeout(120)
@pytest.mark.usefixtures("processes")
def test_searches_equal_an_exact_scan_after_the_writer_is_killed_mid_update() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "crash_vectors.py"),
                           "--rounds", "3", "--seed", "5"],
                          capture_output=True, text=True, timeout=110, check=False)
    counts = json.loads(done.stdout.strip().splitlines()[-1])
    assert counts["rounds"] == 3
    assert counts["bad_rounds"] == 0, done.stderr[-2000:]
    assert done.returncode == 0


def _chunks_of(d: int) -> tuple[Chunk, ...]:
    return tuple(Chunk(idx=i, start=i, end=i + 1, text=f"d{d}c{i}", tokens=2,
                       sha256=sha256(f"d{d}c{i}")) for i in range(2))


def _waiting(writer: SqliteWriter, docs: range) -> dict[int, int]:
    """Documents written for keyword search only (their chunks wait): doc id by number."""
    writer.begin()
    ids = {d: writer.upsert(DocRecord(external_id=f"d{d}", source="raw", uri=None, title="",
                                      content="xx", sha256=str(d)), _chunks_of(d), None).doc_id
           for d in docs}
    writer.commit()
    return ids


def _give_vectors(writer: SqliteWriter, late: dict[int, int], vectors: np.ndarray, *,
                  newest_first: bool = False) -> None:
    """The waiting documents `late` get their vectors (two rows of `vectors` each, in the
    order given), in one transaction."""
    writer.begin()
    for n, d in enumerate(sorted(late, reverse=newest_first)):
        assert writer.add_vectors(late[d], str(d), _chunks_of(d),
                                  vectors[2 * n:2 * n + 2].tobytes())
    writer.commit()


def _chunk_ids(db: Path, waiting: int) -> dict[int, list[int]]:
    """Each document's chunk ids (those waiting when `waiting` is 1, else those with
    vectors), from a new reader."""
    reader = SqliteReader(db)
    try:
        found: dict[int, list[int]] = {}
        for doc_id, chunk_id in reader._rows("SELECT doc_id, chunk_id FROM chunks WHERE "
                                             "waiting = ? ORDER BY doc_id, idx", (waiting,)):
            found.setdefault(doc_id, []).append(chunk_id)
        return found
    finally:
        reader.close()


def test_chunks_that_get_their_vectors_late_keep_their_ids_and_the_file_follows(
        db: Path, tmp_path: Path) -> None:
    """Chunks written before others get their vectors after them: they keep their ids, so
    the file's rows are no longer in id order, and it still finds (and forgets) each one,
    in the writer, in a reader following the log past an older copy, and after a restart
    and a check of every id."""
    writer = SqliteWriter(db, Identity(model="m", dim=DIM))
    try:
        late = _waiting(writer, range(300, 310))
        _add(writer, 400, 20, seed=4)  # later ids, with their vectors at once
    finally:
        writer.close()
    kept = _chunk_ids(db, waiting=1)
    assert sorted(kept) == sorted(late.values()) and all(len(v) == 2 for v in kept.values())
    saved = tmp_path / "saved.vectors"
    shutil.copy(vectors_path(db), saved)
    writer = SqliteWriter(db, Identity(model="m", dim=DIM))
    try:
        vectors = _unit(20, seed=6)
        _give_vectors(writer, late, vectors, newest_first=True)
        state = writer.vectors.state
        assert state is not None and state.live == 360 + 40 + 20
        _delete(writer, [*range(300, 303), *range(400, 403), *range(20, 23)])
        state = writer.vectors.state
        assert state is not None and state.live == 360 + 40 + 20 - 18
    finally:
        writer.close()
    after = _chunk_ids(db, waiting=0)
    assert {doc: after[doc] for doc in kept if doc in after} == {
        late[d]: kept[late[d]] for d in range(303, 310)}  # the ids they had while waiting
    cols = open_columns(vectors_path(db), DIM)
    rows = cols.state()
    assert rows is not None
    assert not np.all(np.diff(cols.ids[:rows.rows]) > 0)  # rows out of id order
    found, exact, reason = _searches(db)
    assert reason is None and found == exact  # the file, removed rows left out
    shutil.copy(saved, vectors_path(db))  # as if the writer died before updating the file
    found, exact, reason = _searches(db)
    assert reason is None and found == exact  # the older copy, the log past it followed
    writer = SqliteWriter(db, Identity(model="m", dim=DIM))  # replays the log on open
    try:
        state = writer.vectors.state
        assert state is not None and state.live == 360 + 40 + 20 - 18
        inode = vectors_path(db).stat().st_ino
        writer.repair_vectors()  # every id, and a sample of the vectors, against SQLite
        assert writer.vectors.checked and not writer.vectors.failed
        assert writer.vectors.pending is None
        assert vectors_path(db).stat().st_ino == inode  # it matched: not rebuilt
    finally:
        writer.close()
    found, exact, reason = _searches(db)
    assert reason is None and found == exact


def test_a_file_compacted_after_its_last_rows_went_is_used_as_it_is_after_a_restart(
        tmp_path: Path) -> None:
    """A commit that removes enough chunks, the last rows among them, has the file written
    anew without them, in id order (chunks that got their vectors late included): its state
    names its new last row, so a reader (and the next writer) takes it as it is instead of
    answering from SQLite until a rebuild."""
    db = tmp_path / "index.db"
    writer = SqliteWriter(db, Identity(model="m", dim=DIM))
    try:
        late = _waiting(writer, range(2000, 2010))
        _add(writer, 0, 1000, seed=8)
        vectors = _unit(20, seed=10)
        _give_vectors(writer, late, vectors)
        inode = vectors_path(db).stat().st_ino
        _delete(writer, range(480, 1000))  # 1040 chunks: past the compaction's threshold
        assert vectors_path(db).stat().st_ino != inode  # written anew
    finally:
        writer.close()
    cols = open_columns(vectors_path(db), DIM)
    state = cols.state()
    assert state is not None and state.rows == 980
    assert np.all(np.diff(cols.ids[:state.rows]) > 0)  # in id order again
    found, exact, reason = _searches(db)
    assert reason is None and found == exact
    writer = SqliteWriter(db, Identity(model="m", dim=DIM))
    try:
        assert writer.vectors.pending is None
        state = writer.vectors.state
        assert state is not None and state.live == 980
        inode = vectors_path(db).stat().st_ino
        writer.repair_vectors()  # the file matches SQLite: checked, not rebuilt
        assert writer.vectors.checked and vectors_path(db).stat().st_ino == inode
    finally:
        writer.close()


def test_an_index_of_schema_6_with_waiting_chunks_gives_them_their_vectors_in_place(
        db: Path) -> None:
    """An index written before chunks kept their ids (no trigger to log a chunk given its
    vector in place) is migrated on open; its waiting chunks then get their vectors under
    their ids, and the vector file has them."""
    writer = SqliteWriter(db, Identity(model="m", dim=DIM))
    try:
        late = _waiting(writer, range(300, 302))
    finally:
        writer.close()
    conn = open_sync_writer(db)
    conn.execute("DROP TABLE kept_vectors")  # schema 9's
    conn.execute("DROP TRIGGER chunk_embedded")  # as schema 6 left it
    for column in ("start_line", "end_line", "start_page", "end_page"):  # schema 8's
        conn.execute(f"ALTER TABLE chunks DROP COLUMN {column}")
    conn.execute("PRAGMA user_version = 6")
    conn.close()
    kept = _chunk_ids(db, waiting=1)
    writer = SqliteWriter(db, Identity(model="m", dim=DIM))
    try:
        vectors = _unit(4, seed=9)
        _give_vectors(writer, late, vectors)
        state = writer.vectors.state
        assert state is not None and state.live == 360 + 4
    finally:
        writer.close()
    assert _chunk_ids(db, waiting=0)[late[300]] == kept[late[300]]
    found, exact, reason = _searches(db)
    assert reason is None and found == exact
