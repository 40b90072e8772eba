"""Which index a command means (the rule is in indexes.py): the one SQLITE_PATH names, else
the folder's own when a folder is given (argument, `--data-folder` or WATCH_DIR), else the
current directory's, or the only one. The folder then is the one the index records."""

from __future__ import annotations

from pathlib import Path

from pocketmcp import indexes
from pocketmcp.config import Config
from pocketmcp.errors import OtherFolder, PocketError, StoreError
from pocketmcp.settings import ON_AN_INDEX, WRITING


def choose(config: Config, command: str | None) -> tuple[Config, indexes.Seen | None]:
    """`config` on the index `command` means, fed from the folder that index records when
    none was given; with the indexes looked at to find it (None: none was looked for), which
    `no_index` lists when the index is not there."""
    if command not in ON_AN_INDEX:
        return config, None
    if config.store.named:  # SQLITE_PATH, or a Postgres schema
        if config.watched.given:
            if command not in (*WRITING, "doctor"):  # feeding it checks at its start;
                _same_folder(config)  # doctor reports
            return config, None
        folder = indexes.recorded_folder(config.main_place())
        return (config if folder is None else config.fed_from(folder)), None
    if config.watched.given:
        return config, None  # SQLITE_PATH is that folder's by the rule (config.load)
    if command in ("index", "watch") and config.watched.root.is_dir():
        return config, None  # ./kb, the folder indexed when none is named
    found, seen = indexes.pick(Path.cwd())
    if found is not None:
        return config.at_index(found.index, found.folder), seen
    if command in ("index", "watch"):
        raise PocketError(f"which folder? `pocketmcp {command} FOLDER` (or set WATCH_DIR); "
                          f"no index was found for {Path.cwd()}")
    return config, seen


def _same_folder(config: Config) -> None:
    """OtherFolder when the named index holds another folder of this machine than the one
    given: its answers would be that folder's (a Postgres schema holds one folder)."""
    try:
        record = config.main_place().folder()
    except StoreError:
        return  # the command that opens the index says why
    folder = config.watched.root.resolve()
    if record is not None and record.other_than(folder):
        raise OtherFolder(f"{config.main_place().describe()} is the index of {record.path}, "
                          f"not of {folder}: name that folder's own index (leave out --db "
                          "and SQLITE_PATH, or its PG_SCHEMA), or leave out the folder")


def not_a_folder(path: Path) -> str:
    """Why `path` (not a folder) cannot be indexed."""
    return f"{path} is a file, not a folder" if path.exists() else f"no folder {path}"


def no_index(config: Config, seen: indexes.Seen | None) -> PocketError:
    """What to say when the index a command needs is not there; `seen`: the indexes `choose`
    looked at (None: it looked at none, and they are looked at now)."""
    where = config.main_place().describe()
    store = config.store
    if store.named_by() or (store.named and not config.watched.given):
        return PocketError(f"no index at {where}; `pocketmcp index FOLDER{store.named_by()}` "
                           "makes it")
    if config.watched.given:
        folder = config.watched.root.absolute()
        if not folder.is_dir():
            return PocketError(f"{not_a_folder(folder)}, and no index of it is there")
        return PocketError(f"no index of {folder} yet (it would be {where}); "
                           f"`pocketmcp index {folder}` makes it")
    every = indexes.pick(Path.cwd())[1] if seen is None else seen
    if not every:
        return PocketError(f"no index found for {Path.cwd()} (nor any other); "
                           "`pocketmcp index FOLDER` makes one")
    listed = "; ".join(f"{folder or '(no folder recorded)'} -> {index}"
                       for index, folder in every)
    return PocketError(f"no index found for {Path.cwd()}, and there are {len(every)}: "
                       f"{listed}. Name the folder (the command's argument FOLDER, or "
                       "--data-folder FOLDER, or run it inside the folder), or the file "
                       "(--db FILE)")
