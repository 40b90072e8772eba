"""How a setting is declared, read and documented.

The part that reads a setting declares it once, on a field of its own small frozen settings
struct: `chunk_size: Annotated[int, Setting("CHUNK_SIZE", help=...)] = 1000`, its type
giving how it is read (a path, a number, a choice of a `Literal`, a list...) and the field's
default its default. Its flag is the variable's name (`--chunk-size`) and the commands that
read it are the part's (`USED_BY` on the struct), unless the declaration names others.
`config.load`, the only reader of os.environ, fills the parts; the CLI's flags, `.env.example`
and docs/settings.md are made from the same declarations. A field without a `Setting` is a
constant or is derived: the environment never sets it.
"""

from __future__ import annotations

import os
import types
import typing
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar, get_args, get_origin, get_type_hints

import msgspec

from pocketmcp.core.secret import Secret
from pocketmcp.errors import ConfigError

# Variables no longer read, each named once in the log when set (docs/changelog.md, 2026-11-28,
# says what replaces each).
REMOVED = ("DATABASES_DIR", "POCKETMCP_CACHE", "MODEL_ID", "MODEL_PATH", "EMBED_INPUT_TYPE",
           "CHUNK_OVERLAP", "MAX_CHUNKS_PER_DOC", "OCR_MAX_PIXELS", "OCR_MAX_PAGES",
           "OCR_THREADS", "OCR_MEMORY_MB", "CONVERT_MEMORY_MB", "URL_TIMEOUT_S",
           "EMBED_BATCH_SIZE", "EMBED_BATCH_TOKENS", "EMBED_THREADS", "EMBED_TIMEOUT_S",
           "EMBED_RETRIES", "EMBED_RETRY_BASE_S", "WRITE_BATCH_FILES", "PG_HNSW_M",
           "PG_HNSW_EF_CONSTRUCTION", "MCP_ALLOWED_ORIGINS", "DEFAULT_LIBRARY", "LIBRARY_FROM",
           "INDEX_THREADS")

# Commands on an index of a folder (init takes a folder, eval makes its own index): each
# reads the index settings, and commands/choosing.py picks the index they mean.
ON_AN_INDEX = ("index", "watch", "serve", "search", "check-search", "open", "doctor", "export",
               "import", "backup")
FEEDING = ("index", "watch", "serve", "eval")  # commands that feed an index from a folder
WRITING = (*FEEDING, "import")  # ... and those that write documents into it
EMBEDDING = (*WRITING, "search", "check-search", "doctor")  # ... and those that embed


class Setting(msgspec.Struct, frozen=True):
    """A field read from the environment variable `env` (given first, the rest by name), or
    from `flag` on the commands `used_by`. Declared "" and (), they are the defaults: the
    flag of the variable's name, none for a secret (command lines are visible to other
    users); the part's commands. In a `Declared`, a flag "" is the environment only."""

    env: str
    help: str
    used_by: tuple[str, ...] = ()
    flag: str = ""
    minimum: float | None = None
    maximum: float | None = None
    verbatim: bool = False  # text kept as given, spaces included; `none`: empty; \n: a break


class Declared(msgspec.Struct, frozen=True):
    """A declared setting, where it goes (the fields from the root of the settings to it) and
    what its type says: how it is read, its choices, whether it may stay unset."""

    path: tuple[str, ...]
    setting: Setting
    kind: str  # path, paths, str, text, int, float, list, choice, secret
    default: Any
    choices: tuple[str, ...] = ()
    optional: bool = False


_KINDS = {Path: "path", str: "str", int: "int", float: "float", Secret: "secret"}
T = TypeVar("T")


def _fields(cls: type) -> Iterator[tuple[str, Any, Setting | None, Any, bool]]:
    """Each field of the struct `cls`: its name, type, `Setting` (None: not a setting),
    default, and whether it is a part (a settings struct of its own)."""
    hints = get_type_hints(cls, include_extras=True)
    for info in msgspec.structs.fields(cls):
        hint = hints[info.name]
        marks = [m for m in getattr(hint, "__metadata__", ()) if isinstance(m, Setting)]
        part = isinstance(hint, type) and issubclass(hint, msgspec.Struct)
        yield info.name, hint, marks[0] if marks else None, info.default, part


def declared(cls: type, path: tuple[str, ...] = ()) -> list[Declared]:
    """The settings declared on the struct `cls` and on its parts (a part held by two structs
    is listed for each, from its one declaration)."""
    found: list[Declared] = []
    for name, hint, setting, default, part in _fields(cls):
        if setting is not None:
            kind, choices, optional = _kind(get_args(hint)[0])
            flag = setting.flag or ("" if kind == "secret" else
                                    "--" + setting.env.lower().replace("_", "-"))
            setting = msgspec.structs.replace(
                setting, flag=flag, used_by=setting.used_by or getattr(cls, "USED_BY", ()))
            found.append(Declared((*path, name), setting, "text" if setting.verbatim else kind,
                                  default, choices, optional))
        elif part:
            found += declared(hint, (*path, name))
    return found


def build(cls: type[T], values: Mapping[str, Any]) -> T:
    """The struct `cls` with its settings and its parts' from `values` (by variable), its
    other fields at their defaults."""
    fields: dict[str, Any] = {}
    for name, hint, setting, _, part in _fields(cls):
        if setting is not None:
            fields[name] = values[setting.env]
        elif part:
            fields[name] = build(hint, values)
    return cls(**fields)


def _kind(hint: Any) -> tuple[str, tuple[str, ...], bool]:
    optional = get_origin(hint) in (types.UnionType, typing.Union)
    if optional:
        hint = next(arg for arg in get_args(hint) if arg is not type(None))
    if get_origin(hint) is Literal:
        return "choice", get_args(hint), optional
    if get_origin(hint) is tuple:
        return ("paths" if get_args(hint)[0] is Path else "list"), (), optional
    return _KINDS[hint], (), optional


def parse(entry: Declared, raw: object, source: str) -> Any:
    """The value of `entry` given as `raw` by `source` (its variable or flag): ConfigError
    naming `source` and what it accepts when it is not one."""
    setting = entry.setting
    if raw is None or (isinstance(raw, str) and raw.strip() == "" and entry.optional):
        if entry.optional:
            return None
        raw = entry.default
    if entry.kind == "text":  # kept as given, spaces included: prefixes end in one
        text = str(raw)
        return "" if text.strip().lower() == "none" else text.replace("\\n", "\n")
    if entry.kind in ("list", "paths"):
        items = raw if isinstance(raw, list | tuple) else str(raw).split(",")
        kept = tuple(str(item).strip() for item in items if str(item).strip())
        return tuple(Path(os.path.expanduser(i)) for i in kept) if entry.kind == "paths" else kept
    text = str(raw).strip()
    if entry.kind == "path":
        if not text:
            raise ConfigError(source, raw, "a file system path")
        return Path(os.path.expanduser(text))
    if entry.kind == "str":
        if not text:
            raise ConfigError(source, raw, "a non-empty string")
        return text
    if entry.kind == "secret":
        if not text or any(c.isspace() or not c.isprintable() for c in text):
            raise ConfigError(source, "***", "printable characters without spaces")
        return Secret(text)
    if entry.kind == "choice":
        if text.lower() not in entry.choices:
            raise ConfigError(source, raw, "one of " + ", ".join(entry.choices))
        return text.lower()
    low, high = setting.minimum, setting.maximum
    if entry.kind == "float":
        accepts = f"a number from {low} to {high}"
        try:
            value = float(text)
        except ValueError:
            raise ConfigError(source, raw, accepts) from None
        if (low is not None and not value >= low) or (high is not None and not value <= high):
            raise ConfigError(source, raw, accepts)  # `not >=` also refuses nan
        return value
    accepts = f"a whole number from {low} to {high}"
    try:
        number = int(text.replace("_", ""))
    except ValueError:
        raise ConfigError(source, raw, accepts) from None
    if (low is not None and number < low) or (high is not None and number > high):
        raise ConfigError(source, raw, accepts)
    return number


def shown(entry: Declared, value: Any) -> str:
    """`value` written as its variable takes it (None: "")."""
    if value is None:
        return ""
    if entry.kind == "secret":
        return str(value.reveal())
    if entry.kind in ("list", "paths"):
        return ",".join(str(item) for item in value)
    if entry.kind == "text":
        return "none" if value == "" else str(value).replace("\n", "\\n")
    if entry.kind == "float":
        return f"{value:g}"
    return str(value)


def settings_table(entries: Sequence[Declared]) -> str:
    """docs/settings.md's table of the settings."""
    rows = ["| Variable | Flag | Default | Meaning |", "| --- | --- | --- | --- |"]
    for e in entries:
        s = e.setting
        default = f"`{shown(e, e.default)}`" if e.default is not None else ""
        if s.minimum is not None:
            default += f" ({s.minimum}-{s.maximum})"
        if e.choices:
            default += " (" + ", ".join(e.choices) + ")"
        flag = f"`{s.flag}`" if s.flag else "(none)"
        rows.append(f"| `{s.env}` | {flag} | {default} | {s.help} |")
    return "\n".join(rows)


def env_example(entries: Sequence[Declared]) -> str:
    """The text of .env.example."""
    lines = ["# PocketMCP settings. Export them, or put them in your MCP client's \"env\" block.",
             "# Command-line flags override them. Empty means the default.", ""]
    for e in entries:
        s = e.setting
        lines.append(f"# {s.help}" + (f" (flag {s.flag})" if s.flag else ""))
        lines.append(f"{s.env}={shown(e, e.default)}")
        lines.append("")
    return "\n".join(lines)
