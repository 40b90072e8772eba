"""The command line, run as a user runs it: a subprocess with real files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pocketmcp.cli import build_parser

A = "# Sourdough\n\nA wild yeast starter leavens sourdough bread.\n"
B = "# Rust\n\nThe borrow checker enforces ownership rules at compile time.\n"


def _run(tmp_path: Path, *args: str, env: dict[str, str] | None = None):
    full_env = {**os.environ, "SQLITE_PATH": str(tmp_path / "idx" / "index.db"),
                "WATCH_DIR": str(tmp_path / "kb"), **(env or {})}
    return subprocess.run([sys.executable, "-m", "pocketmcp", *args], capture_output=True,
                          text=True, env=full_env, timeout=120, cwd=tmp_path)


def test_index_then_search_finds_the_right_file(tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "a.md").write_text(A)
    (kb / "b.md").write_text(B)
    done = _run(tmp_path, "index", "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert (summary["added"], summary["chunks_embedded"]) == (2, 2)
    found = _run(tmp_path, "search", "ownership and borrowing", "-k", "2", "--json")
    assert found.returncode == 0, found.stderr
    hits = json.loads(found.stdout)["hits"]
    assert [h["path"] for h in hits] == ["b.md", "a.md"]
    assert hits[0]["score"] > hits[1]["score"]
    again = json.loads(_run(tmp_path, "index", "--json").stdout)
    assert (again["unchanged"], again["chunks_embedded"]) == (2, 0)


def test_the_summary_reports_each_kind_of_change(tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "a.md").write_text(A)
    (kb / "b.md").write_text(B)
    assert _run(tmp_path, "index").returncode == 0
    (kb / "a.md").write_text(A + "\nRye flour helps.\n")
    (kb / "b.md").unlink()
    (kb / "c.txt").write_text("Tea is brewed at lower temperatures than coffee.")
    done = _run(tmp_path, "index")
    assert done.returncode == 0, done.stderr
    assert "1 added, 1 updated, 0 unchanged, 1 removed" in done.stdout


def _counts(summary: dict[str, int]) -> tuple[int, ...]:
    return tuple(summary[k] for k in ("added", "updated", "unchanged", "skipped", "removed"))


def test_each_file_is_counted_once_and_progress_ends_at_the_total(tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    kb.mkdir()
    for name in "abcde":
        (kb / f"{name}.md").write_text(f"# Note {name}\n\n{A if name < 'c' else B}")
    first = _run(tmp_path, "index", "--json", "--progress", "bar")
    assert first.returncode == 0, first.stderr
    assert _counts(json.loads(first.stdout)) == (5, 0, 0, 0, 0)
    assert "5/5" in first.stderr and "100%" in first.stderr
    (kb / "b.md").write_text(A + "\nRye flour helps.\n")  # updated
    (kb / "d.md").write_bytes(b"\x00\x01\x02 not text \x00" * 20)  # skipped (and unindexed)
    (kb / "e.md").unlink()  # removed
    (kb / "f.md").write_text("# Tea\n\nTea is brewed cooler than coffee.\n")  # added
    second = _run(tmp_path, "index", "--json", "--progress", "lines")
    assert second.returncode == 3, second.stderr  # partial: a file skipped, and named
    summary = json.loads(second.stdout)
    assert summary["skipped_files"] == [{"path": "d.md", "reason": "binary content"}]
    # a and c unchanged; d counted once, as skipped (not also as removed)
    assert _counts(summary) == (1, 1, 2, 1, 1)
    assert summary["files_seen"] == 5
    lines = [ln for ln in second.stderr.splitlines() if ln.startswith("pocketmcp: indexed")]
    assert lines[-1].startswith("pocketmcp: indexed 5/5 files (100%), 1 removed")
    forced = _run(tmp_path, "index", "--force")
    assert forced.returncode == 3
    # re-read and written again, vectors reused; d.md skipped again, and named
    assert "0 added, 4 updated, 0 unchanged, 0 removed, 1 skipped" in forced.stdout
    assert "chunks: 0 embedded, 4 reused" in forced.stdout
    assert "skipped:\n  d.md: binary content" in forced.stdout


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
        busy = _run(tmp_path, "index", "--json")
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


def test_index_fails_with_code_1_when_the_folder_is_missing(tmp_path: Path) -> None:
    done = _run(tmp_path, "index")
    assert done.returncode == 1
    assert "is not a folder" in done.stderr


def test_a_bad_setting_stops_start_up_with_a_clear_message(tmp_path: Path) -> None:
    done = _run(tmp_path, "index", env={"CHUNK_SIZE": "lots"})
    assert done.returncode != 0
    assert "CHUNK_SIZE='lots' is not valid" in done.stderr
    assert "whole number" in done.stderr
    assert "Traceback" not in done.stderr


def test_searching_before_indexing_says_what_to_do(tmp_path: Path) -> None:
    done = _run(tmp_path, "search", "anything")
    assert done.returncode == 1
    assert "pocketmcp index" in done.stderr


def test_another_model_on_an_existing_index_is_refused_with_advice(tmp_path: Path) -> None:
    (tmp_path / "kb").mkdir()
    (tmp_path / "kb" / "a.md").write_text(A)
    assert _run(tmp_path, "index").returncode == 0
    done = _run(tmp_path, "index", env={"MODEL_ID": "BAAI/bge-small-en-v1.5"})
    assert done.returncode == 1
    assert "--rebuild" in done.stderr and "all-MiniLM-L6-v2" in done.stderr


def test_search_json_carries_the_tool_fields_and_filters_by_flags(tmp_path: Path) -> None:
    from pocketmcp.ops.results import SearchMatch

    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "a.md").write_text("---\ntags: [bread]\n---\n" + A)
    (kb / "b.md").write_text(B)
    assert _run(tmp_path, "index").returncode == 0
    found = _run(tmp_path, "search", "sourdough", "--json", "--tag", "bread")
    assert found.returncode == 0, found.stderr
    [hit] = json.loads(found.stdout)["hits"]
    assert set(hit) == {"rank", *SearchMatch.model_fields}
    assert (hit["path"], hit["tags"], hit["stale"]) == ("a.md", ["bread"], False)
    assert hit["modified_at"] and hit["indexed_at"]
    none = _run(tmp_path, "search", "sourdough", "--json", "--modified-before", "2000-01-01")
    assert json.loads(none.stdout)["hits"] == []
    bad = _run(tmp_path, "search", "sourdough", "--modified-after", "someday")
    assert bad.returncode == 1 and "modified_after" in bad.stderr


def test_export_import_and_backup_from_the_command_line(tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "a.md").write_text(A)
    (kb / "b.md").write_text(B)
    assert _run(tmp_path, "index").returncode == 0
    exported = _run(tmp_path, "export", str(tmp_path / "all.jsonl"), "--json")
    assert exported.returncode == 0, exported.stderr
    assert json.loads(exported.stdout)["documents"] == 2
    backup = _run(tmp_path, "backup", str(tmp_path / "copy.db"))
    assert backup.returncode == 0 and "backed up" in backup.stdout
    other = {"SQLITE_PATH": str(tmp_path / "other" / "index.db")}
    imported = _run(tmp_path, "import", str(tmp_path / "all.jsonl"), "--json", env=other)
    assert imported.returncode == 0, imported.stderr
    assert json.loads(imported.stdout)["chunks_embedded"] == 0
    for env in (other, {"SQLITE_PATH": str(tmp_path / "copy.db")}):
        found = _run(tmp_path, "search", "ownership and borrowing", "-k", "1", "--json",
                     env=env)
        assert json.loads(found.stdout)["hits"][0]["path"] == "b.md"


@pytest.mark.parametrize("command", ["index", "watch", "eval", "serve", "search", "export",
                                     "import", "backup", "init", "doctor"])
def test_every_command_prints_its_help(command: str,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        build_parser().parse_args([command, "--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: pocketmcp {command}")
    # search offers search options and where the index is, not indexing settings
    assert ("EMBED_MAX_TOKENS" in out) == (command not in ("search", "init"))
    if command == "search":
        assert "--unique-docs" in out and "--db" in out and "CHUNK_SIZE" not in out


def test_watch_stops_with_the_changes_since_its_first_scan() -> None:
    from pocketmcp.commands.indexing import since
    from pocketmcp.pipeline.state import Stats

    scanned = Stats(seen=155, unchanged=155)
    now = Stats(seen=155, unchanged=155, updated=1, chunks_embedded=1, chunks_reused=10)
    assert since(now, scanned) == {"added": 0, "updated": 1, "unchanged": 0, "removed": 0,
                                   "skipped": 0, "chunks_embedded": 1, "chunks_reused": 10}
