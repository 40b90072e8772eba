"""The command line run as a user runs it: `python -m pocketmcp` in a subprocess, on a
test's folder and index."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from support.processes import embedding_env

A = "# Sourdough\n\nA wild yeast starter leavens sourdough bread.\n"
B = "# Rust\n\nThe borrow checker enforces ownership rules at compile time.\n"


def run_cli(tmp_path: Path, *args: str, env: dict[str, str] | None = None
            ) -> subprocess.CompletedProcess[str]:
    """`pocketmcp ARGS` with the index in tmp_path/idx and the folder tmp_path/kb."""
    full_env = {**os.environ, **embedding_env(), "SQLITE_PATH": str(tmp_path / "idx" / "index.db"),
                "WATCH_DIR": str(tmp_path / "kb"), **(env or {})}
    return subprocess.run([sys.executable, "-m", "pocketmcp", *args], capture_output=True,
                          text=True, env=full_env, timeout=120, cwd=tmp_path)


def run_as_user(home: Path, cwd: Path, *args: str, env: dict[str, str] | None = None,
                stdin: int | None = None) -> subprocess.CompletedProcess[str]:
    """`pocketmcp ARGS` run in `cwd` as a user with the home `home` runs it: no SQLITE_PATH,
    WATCH_DIR or POCKETMCP_TOKEN set (the indexes where the rule puts them, under `home`)."""
    full_env = {k: v for k, v in os.environ.items()
                if k not in ("SQLITE_PATH", "WATCH_DIR", "POCKETMCP_TOKEN", "DATABASES_DIR")}
    full_env.update(embedding_env())
    full_env.update({"HOME": str(home), "XDG_DATA_HOME": str(home / ".local" / "share"),
                     # the model unpacked once, in the user's cache, not in each home
                     "XDG_CACHE_HOME": os.environ.get("XDG_CACHE_HOME",
                                                      str(Path.home() / ".cache")),
                     **(env or {})})
    return subprocess.run([sys.executable, "-m", "pocketmcp", *args], capture_output=True,
                          text=True, env=full_env, timeout=120, cwd=cwd, stdin=stdin)
