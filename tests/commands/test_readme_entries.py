"""The README's editor entries are the ones `pocketmcp init` writes: the same settings, the
same shape, for each of the four clients."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

from pocketmcp.cli import _config, build_parser
from pocketmcp.commands import setup

README = Path(__file__).parents[2] / "README.md"
CLONE = "/home/me/pocketmcp/.venv/bin/pocketmcp"
FOLDER = "/home/me/notes"
DATA = "/home/me/.local/share/pocketmcp"
TITLES = {"Claude Desktop": "claude-desktop", "Cursor": "cursor", "VS Code": "vscode",
          "Claude Code": "claude-code"}


def _readme_entries() -> dict[str, object]:
    """Each client's entry in the README's Editors section: JSON, or Claude Code's command."""
    text = README.read_text(encoding="utf-8")
    section = text.split("\n## Editors\n", 1)[1].split("\n## ", 1)[0]
    found: dict[str, object] = {}
    for title, client in TITLES.items():
        block = re.search(rf"\*\*{re.escape(title)}\*\*[^\n]*\n\n```(json|sh)\n(.*?)```",
                          section, re.DOTALL)
        assert block is not None, title
        kind, body = block.groups()
        found[client] = json.loads(body) if kind == "json" else " ".join(
            body.replace("\\\n", " ").split())
    return found


def _init_entries(printed: str, folder: Path, data: Path) -> dict[str, object]:
    """Each client's entry as `init --print` printed it, on the README's paths."""
    index = re.search(rf"{re.escape(str(data))}/indexes/notes-[0-9a-f]+/index\.db", printed)
    assert index is not None, printed
    readme_index = (f"{DATA}/indexes/notes-"
                    f"{hashlib.sha256(FOLDER.encode()).hexdigest()[:10]}/index.db")
    printed = printed.replace(index.group(), readme_index).replace(str(folder), FOLDER)
    found: dict[str, object] = {}
    for part in re.split(r"^# ", printed, flags=re.MULTILINE)[1:]:
        head, body = part.split("\n", 1)
        client = TITLES[head.split(":", 1)[0]]
        found[client] = " ".join(body.split()) if client == "claude-code" else json.loads(body)
    return found


def test_the_readmes_editor_entries_are_what_init_writes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("WATCH_DIR", "SQLITE_PATH", "STORE"):
        monkeypatch.delenv(name, raising=False)
    data = tmp_path / "share"
    monkeypatch.setenv("XDG_DATA_HOME", str(data))
    folder = tmp_path / "notes"
    folder.mkdir()
    # The clone's `pocketmcp` script, as a user's shell runs it (a test runs `python -m`).
    monkeypatch.setattr("pocketmcp.commands.clients.command", lambda: [CLONE])
    # In this process, without `main` (whose logging would outlive the test's stderr).
    args = build_parser().parse_args(["init", str(folder), "--print"])
    assert setup.init(_config(args), args) == 0
    printed = capsys.readouterr().out
    assert _init_entries(printed, folder, data / "pocketmcp") == _readme_entries()
