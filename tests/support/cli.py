"""The command line run as a user runs it: `python -m pocketmcp` in a subprocess, on a
test's folder and index."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from support.processes import embedding_env

A = "# Sourdough\n\nA wild yeast starter leavens sourdough bread.\n"
B = "# Rust\n\nThe borrow checker enforces ownership rules at compile time.\n"


# `pocketmcp` with fields of the settings' parts set directly: constants and derived values a
# user does not set, which a test of them sets, as JSON in POCKETMCP_TEST_FIELDS (`fields`).
WITH_FIELDS = ("import json, os, sys\n"
               "import msgspec\n"
               "from pocketmcp import cli\n"
               "fields, load = json.loads(os.environ.pop('POCKETMCP_TEST_FIELDS')), cli.load\n"
               "def loaded(*args, **kw):\n"
               "    config = load(*args, **kw)\n"
               "    return msgspec.structs.replace(config, **{part: msgspec.structs.replace(\n"
               "        getattr(config, part), **set_) for part, set_ in fields.items()})\n"
               "cli.load = loaded\n"
               "sys.exit(cli.main())\n")


def fields(**parts: dict[str, Any]) -> dict[str, str]:
    """The environment that sets fields of the settings' parts directly in a `pocketmcp`
    started by `command_for` (`fields(pipeline={"max_chunks_per_doc": 10})`)."""
    return {"POCKETMCP_TEST_FIELDS": json.dumps(parts)}


def command_for(env: dict[str, str]) -> list[str]:
    """How to run `pocketmcp` with `env`: as a user does, or with the fields it sets."""
    if "POCKETMCP_TEST_FIELDS" in env:
        return [sys.executable, "-c", WITH_FIELDS]
    return [sys.executable, "-m", "pocketmcp"]


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
                if k not in ("SQLITE_PATH", "WATCH_DIR", "POCKETMCP_TOKEN")}
    full_env.update(embedding_env())
    full_env.update({"HOME": str(home), "XDG_DATA_HOME": str(home / ".local" / "share"),
                     # the model unpacked once, in the user's cache, not in each home
                     "XDG_CACHE_HOME": os.environ.get("XDG_CACHE_HOME",
                                                      str(Path.home() / ".cache")),
                     **(env or {})})
    return subprocess.run([sys.executable, "-m", "pocketmcp", *args], capture_output=True,
                          text=True, env=full_env, timeout=120, cwd=cwd, stdin=stdin)
