"""A full disk during `index`: a DISK_FULL message naming the index and saying a re-run
completes it, an intact index, and a re-run (once there is room) that completes it. The index
lives on a small tmpfs of its own (mounting needs root; skipped with the reason otherwise)."""

from __future__ import annotations

import errno
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.chaos import check_index
from support.cli import run_cli


@pytest.fixture
def small_disk(tmp_path: Path, processes: dict[str, str]) -> Iterator[Path]:
    disk = tmp_path / "disk"
    disk.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(disk)],
                          capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def test_a_full_disk_says_where_and_that_a_rerun_completes(tmp_path: Path,
                                                            small_disk: Path) -> None:
    kb = tmp_path / "kb"
    kb.mkdir()
    count = 60
    for i in range(count):
        words = " ".join([f"otter heron lichen basalt quartz {i}"] * 40)
        (kb / f"n{i:02d}.md").write_text(f"# Note {i}\n\n{words}\n")
    db = small_disk / "index.db"
    env = {"SQLITE_PATH": str(db)}
    full = run_cli(tmp_path, "index", env=env)
    assert full.returncode == 1
    last = full.stderr.strip().splitlines()[-1]
    assert last.startswith("pocketmcp: DISK_FULL:"), full.stderr[-2000:]
    assert str(db) in last and "run the same command again" in last
    assert "Traceback" not in full.stderr
    assert check_index(db).ok  # what was committed is intact
    subprocess.run(["mount", "-o", "remount,size=64m", str(small_disk)], check=True)
    again = run_cli(tmp_path, "index", "--json", env=env)
    assert again.returncode == 0, again.stderr[-2000:]
    summary = json.loads(again.stdout)
    assert summary["added"] + summary["unchanged"] + summary["updated"] == count
    assert check_index(db).ok


def test_every_form_of_a_full_disk_is_named() -> None:
    from pocketmcp.errors import DiskFull, StoreError, disk_full

    oserror = OSError(errno.ENOSPC, "No space left on device", "/data/index.db.vectors")
    found = disk_full(oserror, "/data/index.db")
    assert isinstance(found, DiskFull) and "/data/index.db.vectors" in str(found)
    wrapped = StoreError("the write was not committed")
    wrapped.__cause__ = StoreError("/data/index.db: database or disk is full")
    assert "/data/index.db" in str(disk_full(wrapped, "/data/index.db"))
    # A task group's failures come together: the full disk is found among the others.
    group = ExceptionGroup("unhandled errors in a TaskGroup",
                           [RuntimeError("stream broken"), wrapped, RuntimeError("closed")])
    assert isinstance(disk_full(ExceptionGroup("outer", [group]), "/x"), DiskFull)
    assert disk_full(ExceptionGroup("g", [ValueError("a"), ValueError("b")]), "/x") is None
    assert disk_full(OSError(errno.EACCES, "denied"), "/x") is None
    assert disk_full(ValueError("no"), "/x") is None
