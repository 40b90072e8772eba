"""The generated parts of the docs are what their generators make from the committed sources:
the settings table (from the settings' declarations) and the benchmark tables (from
bench/results)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def _script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_settings_page_and_env_example_are_current() -> None:
    gen_docs = _script("gen_docs")
    page = (ROOT / "docs" / "settings.md").read_text()
    assert gen_docs.START in page and gen_docs.END in page
    assert page == gen_docs.page_with_settings(page), "run scripts/gen_docs.py"
    assert (ROOT / ".env.example").read_text() == gen_docs.env_text(), "run scripts/gen_docs.py"


def test_a_stale_settings_table_is_caught() -> None:
    gen_docs = _script("gen_docs")
    page = (ROOT / "docs" / "settings.md").read_text()
    stale = page.replace("| `SQLITE_PATH` |", "| `SQLITE_FILE` |", 1)
    assert stale != page and gen_docs.page_with_settings(stale) == page


def test_the_benchmarks_page_is_current() -> None:
    tables = _script("results_tables")
    page = tables.PAGE.read_text()
    for name in tables.TABLES:
        assert f"<!-- results:{name}:start -->" in page, name
    assert page == tables.page_with_tables(page), "run scripts/results_tables.py"
    assert tables.PLOT_COPY.read_bytes() == tables.PLOT.read_bytes(), (
        "run scripts/results_tables.py")


def test_a_changed_result_changes_its_table(tmp_path: Path) -> None:
    tables = _script("results_tables")
    page = tables.PAGE.read_text()
    results = tmp_path / "results"
    results.mkdir()
    for path in tables.RESULTS.glob("*.json"):
        (results / path.name).write_text(path.read_text())
    ingest = (results / "ingest.json").read_text().replace('"ratio": ', '"ratio": 0.5, "old": ', 1)
    (results / "ingest.json").write_text(ingest)
    tables.RESULTS = results
    remade = tables.page_with_tables(page)
    assert remade != page and "**0.500**" in remade
