"""`pocketmcp init` merges the server into the clients' configuration files (keeping what is
there, with a backup) or prints it; `pocketmcp doctor` says what to fix. Never the real home:
HOME points into tmp_path."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from pocketmcp import logs
from pocketmcp.cli import main
from pocketmcp.commands import jsonc


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    # main() in this process: its logs must not be bound to this test's captured stderr,
    # which is closed after it (later tests would log into a closed file).
    monkeypatch.setattr(logs, "configure", lambda level: None)
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.md").write_text("# A\n\nSome text.\n")
    return tmp_path / "home"


def test_init_merges_into_an_existing_file_keeping_other_servers_with_a_backup(
        tmp_path: Path, home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "cursor.json"
    before = {"mcpServers": {"other": {"command": "/usr/bin/other", "args": ["-x"]}},
              "editor.fontSize": 13}
    config.write_text(json.dumps(before))
    code = main(["init", str(tmp_path / "notes"), "--client", "cursor", "--config-file",
                 str(config), "--index", str(tmp_path / "i.db")])
    assert code == 0
    after = json.loads(config.read_text())
    assert after["editor.fontSize"] == 13
    assert after["mcpServers"]["other"] == before["mcpServers"]["other"]
    ours = after["mcpServers"]["notes"]
    assert ours["env"] == {"WATCH_DIR": str(tmp_path / "notes"),
                           "SQLITE_PATH": str(tmp_path / "i.db")}
    assert Path(ours["command"]).is_absolute()
    assert json.loads((tmp_path / "cursor.json.bak").read_text()) == before
    assert "added the server 'notes'" in capsys.readouterr().out
    # Again, the same: said unchanged, and nothing written (the backup is still the first).
    written = config.read_bytes()
    config.with_name("cursor.json.bak").write_text("previous")
    assert main(["init", str(tmp_path / "notes"), "--client", "cursor", "--config-file",
                 str(config), "--index", str(tmp_path / "i.db")]) == 0
    assert "the server 'notes' in " in (out := capsys.readouterr().out) and "unchanged" in out
    assert "replaced" not in out and "added" not in out
    assert config.read_bytes() == written
    assert config.with_name("cursor.json.bak").read_text() == "previous"
    # Another index: the entry is replaced, not duplicated.
    assert main(["init", str(tmp_path / "notes"), "--client", "cursor", "--config-file",
                 str(config), "--index", str(tmp_path / "j.db")]) == 0
    assert list(json.loads(config.read_text())["mcpServers"]) == ["other", "notes"]
    assert "replaced the server 'notes'" in capsys.readouterr().out


def test_init_refuses_a_file_that_is_not_json_and_leaves_it_as_it_was(
        tmp_path: Path, home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "mcp.json"
    text = '{\n  // my servers\n  "servers": {"a": }\n}\n'
    config.write_text(text)
    code = main(["init", str(tmp_path / "notes"), "--client", "vscode", "--config-file",
                 str(config)])
    assert code == 1
    err = capsys.readouterr().err
    assert "is not valid JSON" in err and "line 3" in err and "--print" in err
    assert config.read_text() == text
    assert not (tmp_path / "mcp.json.bak").exists()


def test_init_keeps_the_comments_and_trailing_commas_of_an_editors_json_file(
        tmp_path: Path, home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "mcp.json"
    text = ('{\n  // servers I use\n  "servers": {\n    "other": {"command": "x"}, // keep\n'
            '  },\n  /* inputs,\n     two lines */\n  "inputs": [1, 2,],\n}\n')
    config.write_text(text)
    for name in ("i.db", "j.db"):  # added, then replaced in place
        assert main(["init", str(tmp_path / "notes"), "--client", "vscode", "--config-file",
                     str(config), "--index", str(tmp_path / name)]) == 0
    after = config.read_text()
    for kept in ("// servers I use", '"other": {"command": "x"}, // keep',
                 "/* inputs,\n     two lines */", '"inputs": [1, 2,],'):
        assert kept in after
    assert after.count('"notes"') == 1
    data = jsonc.loads(after)
    assert list(data["servers"]) == ["other", "notes"]
    assert data["servers"]["notes"]["env"]["WATCH_DIR"] == str(tmp_path / "notes")
    assert data["inputs"] == [1, 2]
    out = capsys.readouterr().out
    assert "added the server 'notes'" in out and "replaced the server 'notes'" in out
    assert (tmp_path / "mcp.json.bak").read_text().count('"notes"') == 1  # the one before


def test_init_writes_each_clients_file_under_home_or_prints_without_writing(
        tmp_path: Path, home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["init", str(tmp_path / "notes"), "--print"]) == 0
    out = capsys.readouterr().out
    assert '"servers"' in out and '"type": "stdio"' in out  # VS Code's shape
    assert "claude mcp add notes --env WATCH_DIR=" in out
    assert not home.exists()
    assert main(["init", str(tmp_path / "notes")]) == 0
    written = [p.relative_to(home).as_posix() for p in sorted(home.rglob("*.json"))]
    assert set(written) >= {".cursor/mcp.json", ".claude.json"}
    vscode = [p for p in home.rglob("mcp.json") if "Code" in p.parts]
    assert json.loads(vscode[0].read_text())["servers"]["notes"]["type"] == "stdio"


def test_doctor_names_a_broken_client_config_and_a_missing_folder(
        tmp_path: Path, home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broken = tmp_path / "desktop.json"
    broken.write_text('{"mcpServers": ')
    code = main(["doctor", "--client", "claude-desktop", "--config-file", str(broken),
                 "--data-folder", str(tmp_path / "gone"), "--db", str(tmp_path / "i.db")])
    assert code == 1
    out = capsys.readouterr().out
    assert f"FAIL  folder {tmp_path / 'gone'} does not exist" in out
    assert "Claude Desktop" in out and "is not valid JSON" in out
    assert "ok    model" in out
    assert f"FAIL  index {tmp_path / 'i.db'} does not exist yet" in out
    assert "3 problem(s) to fix" in out


def test_init_run_from_uvs_cache_says_the_entry_lasts_only_as_long_as_the_cache(
        tmp_path: Path, home: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    script = home / ".cache" / "uv" / "archive-v0" / "Xy12" / "bin" / "pocketmcp"
    script.parent.mkdir(parents=True)
    script.write_text("#!/bin/sh\n")
    monkeypatch.setattr(sys, "argv", [str(script)])
    config = tmp_path / "cursor.json"
    assert main(["init", str(tmp_path / "notes"), "--client", "cursor", "--config-file",
                 str(config)]) == 0
    assert json.loads(config.read_text())["mcpServers"]["notes"]["command"] == str(script)
    assert "uv's cache (uvx)" in capsys.readouterr().out
    monkeypatch.setattr(sys, "argv", [str(tmp_path / "venv" / "bin" / "pocketmcp")])
    assert main(["init", str(tmp_path / "notes"), "--client", "cursor", "--config-file",
                 str(config)]) == 0
    assert "uv's cache" not in capsys.readouterr().out


def test_doctor_reads_the_index_model_and_the_wanted_one_once(
        home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The model and index checks share one reading of the model the index records and of
    the one the settings ask for."""
    from pocketmcp.embed import factory
    from pocketmcp.store.sqlite.place import SqlitePlace

    for name in ("POCKETMCP_TOKEN",):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SQLITE_PATH", str(tmp_path / "idx" / "index.db"))
    monkeypatch.setenv("WATCH_DIR", str(tmp_path / "notes"))
    assert main(["index", "--progress", "off"]) == 0
    reads: list[str] = []
    identity, wanted = SqlitePlace.identity, factory.wanted

    def counted_identity(self: SqlitePlace) -> object:
        reads.append("identity")
        return identity(self)

    def counted_wanted(*args: object) -> object:
        reads.append("wanted")
        return wanted(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(SqlitePlace, "identity", counted_identity)
    monkeypatch.setattr(factory, "wanted", counted_wanted)
    capsys.readouterr()
    assert main(["doctor", "--client", "cursor"]) == 0, capsys.readouterr()
    out = capsys.readouterr().out
    assert "loads and embeds offline" in out and "writer lock free" in out
    assert sorted(reads) == ["identity", "wanted"]
