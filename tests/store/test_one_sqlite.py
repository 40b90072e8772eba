"""A process opens its indexes with one SQLite library. The folder record is read without
the engine (sqlite-vec, numpy), and was read with the standard library's sqlite3 while the
engine used pysqlite3: two copies of SQLite on one file, each blind to the other's
connections, and the process died of a bus error when the folder was read beside a writer
and readers that map the file. Run in a child process, so that a crash fails this test
alone."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

CHILD = r"""
import sys, threading, time
from pathlib import Path

from pocketmcp.store.sqlite.connect import sqlite_module
from pocketmcp.store.sqlite.place import SqlitePlace

path = Path(sys.argv[1])
sqlite = sqlite_module()  # the engine's library, as a server chooses it on start
writer = sqlite.connect(str(path), isolation_level=None, check_same_thread=False)
writer.execute("PRAGMA journal_mode=WAL")
writer.execute("CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT)")
writer.execute("CREATE TABLE t(x BLOB)")
for _ in range(200):
    writer.execute("INSERT INTO t VALUES (randomblob(20000))")
stop = time.monotonic() + float(sys.argv[2])
reads = []

def read() -> None:
    conn = sqlite.connect(str(path), isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA mmap_size = 268435456")
    while time.monotonic() < stop:
        conn.execute("SELECT sum(length(x)) FROM t").fetchone()

def write() -> None:
    n = 0
    while time.monotonic() < stop:
        writer.execute("INSERT INTO t VALUES (randomblob(20000))")
        writer.execute("DELETE FROM t WHERE rowid IN (SELECT rowid FROM t LIMIT 1)")
        n += 1
        if n % 50 == 0:
            writer.execute("PRAGMA wal_checkpoint(TRUNCATE)")

def folder() -> None:
    place = SqlitePlace(path, path.parent / "databases")
    while time.monotonic() < stop:
        assert place.folder() is None  # no folder recorded in this file
        reads.append(1)

threads = [threading.Thread(target=f) for f in (read, read, write, folder)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print("folder reads", len(reads))
"""


@pytest.mark.timeout(120)
@pytest.mark.usefixtures("processes")
def test_reading_the_folder_beside_the_engine_keeps_the_process_alive(tmp_path: Path) -> None:
    for _ in range(2):  # the crash came within seconds, most runs
        db = tmp_path / "index.db"
        for stale in tmp_path.glob("index.db*"):
            stale.unlink()
        child = subprocess.run([sys.executable, "-c", CHILD, str(db), "6"],
                               capture_output=True, text=True, timeout=100)
        assert child.returncode == 0, (child.returncode, child.stderr[-2000:])
        assert child.stdout.startswith("folder reads "), child.stdout
        assert int(child.stdout.split()[-1]) > 100, child.stdout
