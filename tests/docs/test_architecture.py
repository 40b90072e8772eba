"""The architecture page names only what exists: every module path, class and message it
names is in the package."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "pocketmcp"
PAGE = ROOT / "docs" / "architecture.md"
# What the page names on purpose although the package no longer has it: the design it
# departed from. And words that look like code names but are not the package's.
GONE = {"FileEmbedded", "aiosqlite"}
WORDS = {"OpenAI", "node_modules/"}


def _sources() -> str:
    return "\n".join(p.read_text(encoding="utf-8") for p in PACKAGE.rglob("*.py"))


def test_every_module_the_architecture_page_names_exists() -> None:
    text = PAGE.read_text(encoding="utf-8")
    paths = set(re.findall(r"[\w/]+(?:\.py|/)(?=[`\s,:;)\"])", text))
    named = sorted(p for p in paths if p.endswith(".py") or p.count("/") >= 1)
    assert len(named) > 40  # the check looks at the page's modules, not at nothing
    every = [p.relative_to(PACKAGE).as_posix() + ("/" if p.is_dir() else "")
             for p in PACKAGE.rglob("*") if "__pycache__" not in p.parts]
    missing = []
    for path in sorted(set(named) - WORDS):
        rel = path.removeprefix("pocketmcp/")
        if not ((ROOT / path).exists() or any(f == rel or f.endswith("/" + rel) for f in every)):
            missing.append(path)
    assert not missing, f"docs/architecture.md names modules that do not exist: {missing}"


def test_every_class_and_message_the_architecture_page_names_exists() -> None:
    text = PAGE.read_text(encoding="utf-8")
    names = set(re.findall(r"`([A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)*)`", text))
    diagrams = "\n".join(re.findall(r"```mermaid\n(.*?)```", text, re.S))
    names |= set(re.findall(r"\b([A-Z][a-z]+(?:[A-Z][a-z0-9]*)+)\b", diagrams))
    assert {"WriterActor", "Batcher", "Precedence", "VectorsFound"} <= names
    sources = _sources()
    missing = sorted(n for n in names - GONE - WORDS
                     if not re.search(rf"^\s*class {n}\b", sources, re.M))
    assert not missing, f"docs/architecture.md names classes that do not exist: {missing}"
    assert not any(re.search(rf"\b{name}\b", sources) for name in GONE)
