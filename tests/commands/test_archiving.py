"""`pocketmcp export`, `import` and `backup` (commands/archiving.py), run as a user runs them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.cli import A, B, run_cli

pytestmark = pytest.mark.usefixtures("processes")


def test_export_import_and_backup_from_the_command_line(tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "a.md").write_text(A)
    (kb / "b.md").write_text(B)
    assert run_cli(tmp_path, "index").returncode == 0
    exported = run_cli(tmp_path, "export", str(tmp_path / "all.jsonl"), "--json")
    assert exported.returncode == 0, exported.stderr
    assert json.loads(exported.stdout)["documents"] == 2
    backup = run_cli(tmp_path, "backup", str(tmp_path / "copy.db"))
    assert backup.returncode == 0 and "backed up" in backup.stdout
    other = {"SQLITE_PATH": str(tmp_path / "other" / "index.db")}
    imported = run_cli(tmp_path, "import", str(tmp_path / "all.jsonl"), "--json", env=other)
    assert imported.returncode == 0, imported.stderr
    assert json.loads(imported.stdout)["chunks_embedded"] == 0
    for env in (other, {"SQLITE_PATH": str(tmp_path / "copy.db")}):
        found = run_cli(tmp_path, "search", "ownership and borrowing", "-k", "1", "--json",
                     env=env)
        assert json.loads(found.stdout)["hits"][0]["path"] == "b.md"
