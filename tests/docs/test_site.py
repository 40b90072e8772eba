"""The docs site: `mkdocs build --strict` of the real configuration and pages, and the README
that leads to it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"


class _ConfigLoader(yaml.SafeLoader):
    """Reads mkdocs.yml safely: its `!!python/name:` tags are kept as plain strings."""


_ConfigLoader.add_multi_constructor(
    "tag:yaml.org,2002:python/name:", lambda loader, suffix, node: suffix)


def _nav_pages(nav: list[object]) -> list[str]:
    pages: list[str] = []
    for entry in nav:
        values = entry.values() if isinstance(entry, dict) else [entry]
        for value in values:
            if isinstance(value, list):
                pages += _nav_pages(value)
            elif isinstance(value, str):
                pages.append(value)
    return pages


@pytest.fixture
def built_site(tmp_path: Path) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """`mkdocs build --strict` of this checkout into a folder of the test's: the folder and
    how the build went."""
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
         str(ROOT / "mkdocs.yml"), "--site-dir", str(site)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=180, check=False)
    return site, built


def test_the_site_builds_strictly(built_site: tuple[Path, subprocess.CompletedProcess[str]]
                                  ) -> None:
    site, built = built_site
    assert built.returncode == 0, built.stderr[-4000:]
    assert "WARNING" not in built.stderr, built.stderr[-4000:]
    # Every page in the nav was rendered, the generated ones with their tables.
    config = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=_ConfigLoader)
    for page in _nav_pages(config["nav"]):
        out = site / ("index.html" if page == "index.md" else f"{page[:-3]}/index.html")
        assert out.is_file(), page
    settings = (site / "settings" / "index.html").read_text()
    assert "<code>SQLITE_PATH</code>" in settings and "<table>" in settings
    benchmarks = (site / "benchmarks" / "index.html").read_text()
    assert benchmarks.count("<table>") >= 10
    assert (site / "search-latency.png").is_file() and (site / "web-status.png").is_file()
    architecture = (site / "architecture" / "index.html").read_text()
    assert 'class="mermaid"' in architecture  # the diagrams are drawn, not shown as code


def test_the_readme_is_a_short_front_door() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= 300
    quickstart = text.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    assert len(quickstart.splitlines()) <= 40
    for line in ("scripts/demo.sh", "scripts/test.sh", "pocketmcp index ~/notes",
                 "pocketmcp search \"", "pocketmcp init ~/notes", "pocketmcp doctor ~/notes",
                 "source .venv/bin/activate"):
        assert line in quickstart, line
    assert re.search(r"!\[[^\]]+\]\(docs/[\w-]+\.png\)", text), "one picture"


def test_the_readme_links_to_pages_that_exist() -> None:
    links = re.findall(r"\]\((docs/[^)#\s]*)", README.read_text())
    assert len(links) >= 15
    for link in links:
        assert (ROOT / link).exists(), link
