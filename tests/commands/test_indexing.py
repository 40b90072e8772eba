"""`pocketmcp index` and `pocketmcp watch` (commands/indexing.py), run as a user runs them: a
subprocess with real files (embedding through the test provider)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.cli import A, B, run_cli

from pocketmcp import logs
from pocketmcp.cli import main


@pytest.mark.usefixtures("processes")
def test_index_then_search_finds_the_right_file(tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "a.md").write_text(A)
    (kb / "b.md").write_text(B)
    done = run_cli(tmp_path, "index", "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert (summary["added"], summary["chunks_embedded"]) == (2, 2)
    found = run_cli(tmp_path, "search", "ownership and borrowing", "-k", "2", "--json",
                    "--min-score", "0")
    assert found.returncode == 0, found.stderr
    hits = json.loads(found.stdout)["hits"]
    assert [h["path"] for h in hits] == ["b.md", "a.md"]
    assert hits[0]["score"] > hits[1]["score"]
    again = json.loads(run_cli(tmp_path, "index", "--json").stdout)
    assert (again["unchanged"], again["chunks_embedded"]) == (2, 0)


@pytest.mark.usefixtures("processes")
def test_the_summary_reports_each_kind_of_change(tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "a.md").write_text(A)
    (kb / "b.md").write_text(B)
    assert run_cli(tmp_path, "index").returncode == 0
    (kb / "a.md").write_text(A + "\nRye flour helps.\n")
    (kb / "b.md").unlink()
    (kb / "c.txt").write_text("Tea is brewed at lower temperatures than coffee.")
    done = run_cli(tmp_path, "index")
    assert done.returncode == 0, done.stderr
    assert "1 added, 1 updated, 0 unchanged, 1 removed" in done.stdout


def _counts(summary: dict[str, int]) -> tuple[int, ...]:
    return tuple(summary[k] for k in ("added", "updated", "unchanged", "skipped", "removed"))


@pytest.mark.usefixtures("processes")
def test_each_file_is_counted_once_and_progress_ends_at_the_total(tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    kb.mkdir()
    for name in "abcde":
        (kb / f"{name}.md").write_text(f"# Note {name}\n\n{A if name < 'c' else B}")
    first = run_cli(tmp_path, "index", "--json", "--progress", "bar")
    assert first.returncode == 0, first.stderr
    assert _counts(json.loads(first.stdout)) == (5, 0, 0, 0, 0)
    assert "5/5" in first.stderr and "100%" in first.stderr
    (kb / "b.md").write_text(A + "\nRye flour helps.\n")  # updated
    (kb / "d.md").write_bytes(b"\x00\x01\x02 not text \x00" * 20)  # skipped (and unindexed)
    (kb / "e.md").unlink()  # removed
    (kb / "f.md").write_text("# Tea\n\nTea is brewed cooler than coffee.\n")  # added
    second = run_cli(tmp_path, "index", "--json", "--progress", "lines")
    assert second.returncode == 3, second.stderr  # partial: a file skipped, and named
    summary = json.loads(second.stdout)
    assert summary["skipped_files"] == [{"path": "d.md", "reason": "binary content"}]
    # a and c unchanged; d counted once, as skipped (not also as removed)
    assert _counts(summary) == (1, 1, 2, 1, 1)
    assert summary["files_seen"] == 5
    lines = [ln for ln in second.stderr.splitlines() if ln.startswith("pocketmcp: indexed")]
    assert lines[-1].startswith("pocketmcp: indexed 5/5 files (100%), 1 removed")
    forced = run_cli(tmp_path, "index", "--force")
    assert forced.returncode == 3
    # re-read and checked, nothing changed: unchanged, not "updated"; no vector made again;
    # d.md skipped again, and named
    assert "0 added, 0 updated, 4 unchanged, 0 removed, 1 skipped" in forced.stdout
    assert "chunks: 0 embedded, 4 reused" in forced.stdout
    assert ("--force: 4 files re-read and checked, 0 changed; 0 chunks re-embedded, 4 kept"
            in forced.stdout)
    assert "skipped:\n  d.md: binary content" in forced.stdout


@pytest.mark.usefixtures("processes")
def test_a_second_index_run_waits_for_the_writer_or_exits_busy(tmp_path: Path) -> None:
    from filelock import FileLock

    from pocketmcp.store.sqlite.files import lock_path

    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "a.md").write_text(A)
    index = tmp_path / "idx" / "index.db"
    index.parent.mkdir()
    other = FileLock(str(lock_path(index)), thread_local=False)  # another run, writing
    other.acquire()
    try:
        busy = run_cli(tmp_path, "index", "--json")
        assert busy.returncode == 4, busy.stderr
        assert "another process is writing" in busy.stderr and "--wait" in busy.stderr
        assert busy.stdout == ""
        env = {**os.environ, "SQLITE_PATH": str(index), "WATCH_DIR": str(kb)}
        with open(tmp_path / "waiting.err", "w") as err:
            waiting = subprocess.Popen(
                [sys.executable, "-m", "pocketmcp", "index", "--json", "--wait", "60"],
                stdout=subprocess.PIPE, stderr=err, text=True, env=env, cwd=tmp_path)
        try:
            deadline = time.monotonic() + 30
            while "waiting_for_writer_lock" not in (tmp_path / "waiting.err").read_text():
                assert waiting.poll() is None and time.monotonic() < deadline
                time.sleep(0.05)
        except BaseException:
            waiting.kill()
            raise
    finally:
        other.release()  # the other run ends: the waiting one goes on
    out, _ = waiting.communicate(timeout=120)
    assert waiting.returncode == 0, (tmp_path / "waiting.err").read_text()
    assert json.loads(out)["added"] == 1


def test_a_folder_that_is_not_there_or_is_a_file_or_no_index_is_named_as_such(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Code 1 and what is wrong with the folder given: not "WATCH_DIR=... is not a
    folder" for a setting never set, nor advice to index a folder that does not exist."""
    for name in ("WATCH_DIR", "SQLITE_PATH", "STORE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "home" / "data"))
    monkeypatch.setattr(logs, "configure", lambda level: None)  # see tests/commands/test_setup
    monkeypatch.chdir(tmp_path)
    missing, file = tmp_path / "notez", tmp_path / "a.md"
    file.write_text("# A\n")
    for command, said in [(["index", str(missing)], f"no folder {missing}"),
                          (["watch", str(missing)], f"no folder {missing}"),
                          (["index", str(file)], f"{file} is a file, not a folder"),
                          (["search", "dns", str(missing)],
                           f"no folder {missing}, and no index of it is there"),
                          # no folder named and no index at all: the indexes looked at
                          (["open"], f"no index found for {tmp_path} (nor any other)")]:
        assert main(command) == 1, command
        err = capsys.readouterr().err
        assert said in err and "WATCH_DIR" not in err and "makes it" not in err, err


def test_another_model_on_an_existing_index_is_refused_with_advice(
        tmp_path: Path, processes: dict[str, str]) -> None:
    (tmp_path / "kb").mkdir()
    (tmp_path / "kb" / "a.md").write_text(A)
    assert run_cli(tmp_path, "index").returncode == 0
    done = run_cli(tmp_path, "index", env={"EMBED_MODEL": "nomic-embed-text",
                                           "EMBED_DIMENSIONS": "384"})
    assert done.returncode == 1
    assert "--rebuild" in done.stderr and processes["EMBED_MODEL"] in done.stderr


def test_watch_stops_with_the_changes_since_its_first_scan() -> None:
    from pocketmcp.commands.indexing import since
    from pocketmcp.pipeline.state import Stats

    scanned = Stats(seen=155, unchanged=155)
    now = Stats(seen=155, unchanged=155, updated=1, chunks_embedded=1, chunks_reused=10)
    assert since(now, scanned) == {"added": 0, "updated": 1, "unchanged": 0, "removed": 0,
                                   "skipped": 0, "no_text_found": 0, "chunks_embedded": 1,
                                   "chunks_reused": 10, "chunks_removed": 0}


@pytest.mark.usefixtures("processes")
def test_index_returns_right_after_its_last_commit_and_logs_the_counts_of_its_summary(
        tmp_path: Path, store_env: dict[str, str]) -> None:
    """No idle tail: the process ends within a second of its last commit (the commit's time
    as its debug line gives it, so a slow start does not count), whatever the run wrote:
    vectors, files moved, keywords only, vectors only. Its log line gives the summary's counts."""
    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "a.md").write_text(A)
    (kb / "b.md").write_text(B)
    assert run_cli(tmp_path, "index", env=store_env).returncode == 0
    changes = [
        lambda: (kb / "a.md").write_text(A + "\nRye flour makes it livelier.\n"),  # vectors
        lambda: (kb / "b.md").rename(kb / "c.md"),  # moved: removed, added, all reused
        lambda: (kb / "a.md").write_text(A + "\nSpelt too.\n"),  # keywords first
        lambda: None,  # no file: the vectors keywords first left
    ]
    for n, change in enumerate(changes):
        change()
        before = time.time()
        done = run_cli(tmp_path, "index", "--json", *(["--keywords-first"] if n == 2 else []),
                       env={**store_env, "LOG_LEVEL": "debug"})
        ended = time.time()
        assert done.returncode == 0, done.stderr
        lines = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
        commits = [line for line in lines if "commit" in line]
        summary = json.loads(done.stdout)
        assert commits, done.stderr
        last = max(_at(line) for line in commits)
        assert before < last and ended - last < 1.0, (n, ended - last)
        [logged] = [line for line in lines if line["event"] == "initial_indexing_done"]
        same = {key: logged[key] for key in summary if key in logged}
        assert same == {key: summary[key] for key in same}
        assert len(same) == 9 and logged["files"] == summary["files_seen"]
    # The last run changed no file, and embedded what keywords first left waiting.
    assert (summary["unchanged"], summary["chunks_embedded"]) == (2, 1)


def _at(line: dict[str, object]) -> float:
    from datetime import datetime

    return datetime.fromisoformat(str(line["timestamp"]).replace("Z", "+00:00")).timestamp()
