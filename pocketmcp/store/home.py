"""The user's data folder of PocketMCP, as `platformdirs` gives it on Linux, macOS and Windows
(e.g. ~/.local/share/pocketmcp): where the folder rule keeps its indexes (indexes.py) and a
Postgres index keeps the files of its own (pg/place.py)."""

from __future__ import annotations

from pathlib import Path

APP = "pocketmcp"


def data_dir() -> Path:
    import platformdirs  # only when a path is asked for

    return Path(platformdirs.user_data_path(APP, appauthor=False))
