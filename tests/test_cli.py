"""The command line's parser and start-up (cli.py): every command's help, and a bad setting
stopping start-up with a clear message."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.cli import run_cli

from pocketmcp.cli import build_parser


def test_a_bad_setting_stops_start_up_with_a_clear_message(tmp_path: Path) -> None:
    done = run_cli(tmp_path, "index", env={"CHUNK_SIZE": "lots"})
    assert done.returncode != 0
    assert "CHUNK_SIZE='lots' is not valid" in done.stderr
    assert "whole number" in done.stderr
    assert "Traceback" not in done.stderr


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
