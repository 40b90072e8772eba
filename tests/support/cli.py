"""The command line run as a user runs it: `python -m pocketmcp` in a subprocess, on a
test's folder and index."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

A = "# Sourdough\n\nA wild yeast starter leavens sourdough bread.\n"
B = "# Rust\n\nThe borrow checker enforces ownership rules at compile time.\n"


def run_cli(tmp_path: Path, *args: str, env: dict[str, str] | None = None
            ) -> subprocess.CompletedProcess[str]:
    """`pocketmcp ARGS` with the index in tmp_path/idx and the folder tmp_path/kb."""
    full_env = {**os.environ, "SQLITE_PATH": str(tmp_path / "idx" / "index.db"),
                "WATCH_DIR": str(tmp_path / "kb"), **(env or {})}
    return subprocess.run([sys.executable, "-m", "pocketmcp", *args], capture_output=True,
                          text=True, env=full_env, timeout=120, cwd=tmp_path)
