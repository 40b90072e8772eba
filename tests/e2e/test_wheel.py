"""The built wheel, installed into a fresh venv, runs: --version, index and search on a small
folder, offline. Its dependencies are taken from this environment (a .pth file) so the test
takes seconds; scripts/check_wheel.sh installs the wheel with its dependencies from scratch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _run(*args: str | Path, cwd: Path, env: dict[str, str] | None = None,
         ) -> subprocess.CompletedProcess[str]:
    # Never this checkout's PYTHONPATH: the venv must find the wheel's package, not ours.
    env = {k: v for k, v in (os.environ if env is None else env).items()
           if k != "PYTHONPATH"}
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=180)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with the wheel built from this checkout installed in it; its bin/."""
    tmp = tmp_path_factory.mktemp("wheel")
    # pip builds it with the build backend of pyproject.toml (hatchling, from pip's cache)
    built = _run(sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", tmp / "dist",
                 ROOT, cwd=tmp)
    assert built.returncode == 0, built.stderr[-3000:]
    wheel = next((tmp / "dist").glob("pocketmcp-*.whl"))
    venv.create(tmp / "venv", with_pip=False)
    bin_dir = tmp / "venv" / ("Scripts" if os.name == "nt" else "bin")
    site = Path(sysconfig.get_path("purelib", vars={"base": str(tmp / "venv"),
                                                    "platbase": str(tmp / "venv")}))
    # The dependencies: this environment's packages, after the venv's own.
    (site / "deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    # This environment's pip, run by the venv's python: the wheel goes into the venv, its
    # script starts the venv's python. --ignore-installed: the checkout's own install, seen
    # through deps.pth, is left alone (never uninstalled).
    done = _run(bin_dir / "python", "-m", "pip", "install", "--no-deps", "--ignore-installed",
                "-q", wheel, cwd=tmp)
    assert done.returncode == 0, done.stderr[-3000:]
    return bin_dir


@pytest.mark.usefixtures("model_processes")
def test_the_wheel_installs_and_indexes_and_searches_offline(wheel: Path, tmp_path: Path
                                                            ) -> None:
    installed = wheel
    python = installed / "python"
    where = _run(python, "-c", "import pocketmcp; print(pocketmcp.__file__)", cwd=tmp_path)
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()).is_relative_to(installed.parent), where.stdout
    version = _run(installed / "pocketmcp", "--version", cwd=tmp_path)
    assert version.returncode == 0 and version.stdout.startswith("pocketmcp 0."), version
    (tmp_path / "kb").mkdir()
    (tmp_path / "kb" / "tea.md").write_text("# Tea\n\nGreen tea brews best at 80 °C.\n")
    (tmp_path / "kb" / "bike.md").write_text("# Bikes\n\nA flat tyre needs a new tube.\n")
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path),
           "WATCH_DIR": str(tmp_path / "kb"), "SQLITE_PATH": str(tmp_path / "i.db"),
           # offline: nothing may be fetched
           "HF_HUB_OFFLINE": "1", "NO_PROXY": "*", "HTTPS_PROXY": "http://127.0.0.1:9",
           "HTTP_PROXY": "http://127.0.0.1:9"}
    for key in ("XDG_CACHE_HOME",):
        if key in os.environ:
            env[key] = os.environ[key]
    indexed = _run(installed / "pocketmcp", "index", "--json", cwd=tmp_path, env=env)
    assert indexed.returncode == 0, indexed.stderr[-3000:]
    assert json.loads(indexed.stdout)["added"] == 2
    found = _run(installed / "pocketmcp", "search", "fixing a puncture", "-k", "1", "--json",
                 "--min-score", "0",
                 cwd=tmp_path, env=env)
    assert found.returncode == 0, found.stderr[-3000:]
    assert json.loads(found.stdout)["hits"][0]["path"] == "bike.md"
