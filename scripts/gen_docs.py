"""Regenerates .env.example and the README's settings table from pocketmcp.settings.SETTINGS."""

from __future__ import annotations

import re
from pathlib import Path

from pocketmcp.settings import env_example, settings_table

ROOT = Path(__file__).resolve().parents[1]
START, END = "<!-- settings:start -->", "<!-- settings:end -->"


def readme_with_settings(text: str) -> str:
    pattern = re.compile(re.escape(START) + ".*?" + re.escape(END), re.DOTALL)
    return pattern.sub(lambda _: f"{START}\n{settings_table()}\n{END}", text)


def main() -> None:
    (ROOT / ".env.example").write_text(env_example())
    readme = ROOT / "README.md"
    readme.write_text(readme_with_settings(readme.read_text()))


if __name__ == "__main__":
    main()
