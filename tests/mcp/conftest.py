"""What the sharing tests have in common: a folder of one note about tea (`root`), whose
index is `support.mcp_harness.index_of(root)`."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "kb").mkdir()
    (tmp_path / "kb" / "tea.md").write_text("# Tea\n\nGreen tea brews best at 80 °C for two "
                                            "minutes.\n")
    return tmp_path
