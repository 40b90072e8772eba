"""The command line, run as a user runs it: a subprocess with real files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
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
                                     "import", "backup"])
def test_every_command_prints_its_help(command: str,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        build_parser().parse_args([command, "--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: pocketmcp {command}") and "EMBED_MAX_TOKENS" in out
