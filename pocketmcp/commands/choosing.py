"""Which index a command means (the rule is in indexes.py): the one SQLITE_PATH names, else
the folder's own when a folder is given (argument, `--data-folder` or WATCH_DIR), else the
current directory's, or the only one. The folder then is the one the index records."""

from __future__ import annotations

from pathlib import Path

from pocketmcp import indexes
from pocketmcp.config import Config
from pocketmcp.errors import PocketError, StoreError
from pocketmcp.settings import ON_AN_INDEX


def choose(config: Config, command: str | None) -> Config:
    """`config` on the index `command` means, fed from the folder that index records when
    none was given."""
    if command not in ON_AN_INDEX:
        return config
    if config.sqlite_path_given or config.store == "postgres":
        if config.watch_dir_given:
            return config
        folder = _recorded(config)
        return config if folder is None else config.replace(watch_dir=folder,
                                                             watch_dir_given=True)
    if config.watch_dir_given:
        return config  # SQLITE_PATH is that folder's by the rule (config.load)
    if command in ("index", "watch") and config.watch_dir.is_dir():
        return config  # ./kb, the folder indexed when none is named
    found, _ = indexes.pick(Path.cwd())
    if found is not None:
        return config.at_index(found.index, found.folder)
    if command in ("index", "watch"):
        raise PocketError(f"which folder? `pocketmcp {command} FOLDER` (or set WATCH_DIR); "
                          f"no index was found for {Path.cwd()}")
    return config


def _recorded(config: Config) -> Path | None:
    try:
        record = config.main_place().folder()
    except StoreError:
        return None  # reported by the command, which opens the index itself
    return None if record is None else record.root


def no_index(config: Config) -> PocketError:
    """What to say when the index a command needs is not there."""
    where = config.main_place().describe()
    if config.sqlite_path_given:
        return PocketError(f"no index at {where}; `pocketmcp index FOLDER --db {where}` "
                           "makes it")
    if config.watch_dir_given:
        folder = config.watch_dir.absolute()
        return PocketError(f"no index of {folder} yet (it would be {where}); "
                           f"`pocketmcp index {folder}` makes it")
    _, every = indexes.pick(Path.cwd())
    if not every:
        return PocketError(f"no index found for {Path.cwd()} (nor any other); "
                           "`pocketmcp index FOLDER` makes one")
    listed = "; ".join(f"{folder or '(no folder recorded)'} -> {index}"
                       for index, folder in every)
    return PocketError(f"no index found for {Path.cwd()}, and there are {len(every)}: "
                       f"{listed}. Name the folder (--data-folder FOLDER, or run it inside "
                       "the folder), or the file (--db FILE)")
