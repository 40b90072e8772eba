"""Regenerates .env.example and the settings table of docs/settings.md from
pocketmcp.settings.SETTINGS (tests/docs checks that both are current)."""

from __future__ import annotations

import re
from pathlib import Path

from pocketmcp.settings import env_example, settings_table

ROOT = Path(__file__).resolve().parents[1]
SETTINGS_PAGE = ROOT / "docs" / "settings.md"
START, END = "<!-- settings:start -->", "<!-- settings:end -->"


def page_with_settings(text: str) -> str:
    """The page with the table between its markers made again from SETTINGS."""
    pattern = re.compile(re.escape(START) + ".*?" + re.escape(END), re.DOTALL)
    return pattern.sub(lambda _: f"{START}\n{settings_table()}\n{END}", text)


def main() -> None:
    (ROOT / ".env.example").write_text(env_example())
    SETTINGS_PAGE.write_text(page_with_settings(SETTINGS_PAGE.read_text()))


if __name__ == "__main__":
    main()
