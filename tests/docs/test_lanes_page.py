"""docs/development.md shows the suite's lanes as tests/support/lanes.py holds them: every
fixture that marks, every test that runs the real model in its processes, every skip CI
allows."""

from __future__ import annotations

from pathlib import Path

from support.lanes import MARKS, REAL_MODEL_PROCESSES, SKIPS_ALLOWED_ON_CI

PAGE = Path(__file__).resolve().parents[2] / "docs" / "development.md"


def test_the_development_page_names_each_marking_fixture_real_model_test_and_allowed_skip(
) -> None:
    text = PAGE.read_text()
    for fixture, marks in MARKS.items():
        assert f"`{fixture}`" in text, fixture
        assert all(f"`{mark}`" in text for mark in marks), marks
    for test in REAL_MODEL_PROCESSES:
        assert f"`{test}`" in text, test
    for test in SKIPS_ALLOWED_ON_CI:
        module, name = test.split("::")
        assert f"`{module}`" in text and f"`{name}`" in text, test
