"""The command line's parser and start-up (cli.py): every command's help, and a bad setting
stopping start-up with a clear message."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from support.cli import run_cli

from pocketmcp.cli import build_parser, with_command
from pocketmcp.config import declarations
from pocketmcp.settings import ON_AN_INDEX


@pytest.mark.usefixtures("processes")
def test_a_bad_setting_stops_start_up_with_a_clear_message(tmp_path: Path) -> None:
    done = run_cli(tmp_path, "index", env={"CHUNK_SIZE": "lots"})
    assert done.returncode != 0
    assert "CHUNK_SIZE='lots' is not valid" in done.stderr
    assert "whole number" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("command", ["index", "watch", "eval", "serve", "search", "export",
                                     "import", "backup", "init", "doctor",
                                     "check-search", "open"])
def test_every_command_prints_its_help(command: str,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        build_parser().parse_args([command, "--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: pocketmcp {command}")
    # each command lists the settings it reads, and no other
    for entry in declarations():
        setting = entry.setting
        if setting.flag:
            listed = re.search(rf"^  {re.escape(setting.flag)} ", out, re.MULTILINE)
            assert bool(listed) == (command in setting.used_by), setting.flag
    if command == "search":
        assert "--unique-docs" in out and "--db" in out and "CHUNK_SIZE" not in out


def test_every_setting_with_a_flag_is_read_by_some_command() -> None:
    """A setting no command reads would be in no `--help` (nor take effect from a flag)."""
    unread = [e.setting.env for e in declarations() if e.setting.flag and not e.setting.used_by]
    assert unread == []


def test_a_commands_help_leaves_out_the_settings_it_does_not_read(
        capsys: pytest.CaptureFixture[str]) -> None:
    for command, absent, present in (
            ("index", ("--transport", "--tools", "--port", "--allowed-hosts",
                       "--debounce-ms", "--pg-ef-search"), ("--chunk-size", "--db")),
            ("search", ("--chunk-size", "--transport", "--convert-workers"),
             ("--db", "--data-folder", "--min-score")),
            ("doctor", ("--transport", "--convert-workers"), ("--db", "--include"))):
        with pytest.raises(SystemExit):
            build_parser().parse_args([command, "--help"])
        out = capsys.readouterr().out
        assert not [flag for flag in absent if flag in out], command
        assert all(flag in out for flag in present), command


@pytest.mark.parametrize("command", ON_AN_INDEX)
def test_every_command_on_a_folders_index_takes_the_folder_as_its_argument(
        command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pocketmcp.cli import _config

    for name in ("WATCH_DIR", "SQLITE_PATH", "STORE"):
        monkeypatch.delenv(name, raising=False)
    folder = tmp_path / "notes"
    folder.mkdir()
    before = {"search": ["a query"], "export": ["out.jsonl"], "import": ["in.jsonl"],
              "backup": ["copy.db"]}.get(command, [])
    args = build_parser().parse_args([command, *before, str(folder)])
    config = _config(args)
    assert (config.watched.root, config.watched.given) == (folder, True)
    # The same index as `pocketmcp index FOLDER` makes (the folder's own, by the rule).
    indexed = _config(build_parser().parse_args(["index", str(folder)]))
    assert config.main_place().describe() == indexed.main_place().describe()


def test_a_folder_alone_on_the_command_line_is_served(tmp_path: Path) -> None:
    parser = build_parser()
    assert with_command(parser, [str(tmp_path)]) == ["serve", str(tmp_path)]
    assert with_command(parser, ["--title", "t"]) == ["serve", "--title", "t"]
    assert with_command(parser, []) == ["serve"]
    assert with_command(parser, ["index", str(tmp_path)]) == ["index", str(tmp_path)]
    assert with_command(parser, [str(tmp_path / "missing")]) == [str(tmp_path / "missing")]
