"""Settings: the only module that reads os.environ.

Every setting has one entry in SETTINGS, which gives its environment variable, its CLI flag,
its type, default and help. The CLI, `.env.example` and the README are made from this table.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec

from pocketmcp.errors import ConfigError

DEFAULT_MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
MAX_DOCS_PER_CALL = 64  # documents in one upsert_documents call

# The MCP tools, and the named sets the TOOLS setting accepts besides single names.
TOOL_NAMES = (
    "search", "get_document", "list_documents", "list_libraries", "status",
    "upsert_documents", "delete_documents", "ingest_file", "ingest_url", "reindex",
    "create_database", "insert_document", "find_similar_documents", "delete_document",
)
TOOL_SETS: dict[str, tuple[str, ...]] = {
    "all": TOOL_NAMES,
    "core": ("search", "get_document", "list_documents", "list_libraries", "status"),
}


class Setting(msgspec.Struct, frozen=True):
    field: str
    env: str
    flag: str
    kind: str  # "path" | "str" | "int" | "list" | "choice"
    default: Any
    help: str
    minimum: int | None = None
    maximum: int | None = None
    choices: tuple[str, ...] = ()
    optional: bool = False


SETTINGS: tuple[Setting, ...] = (
    Setting("sqlite_path", "SQLITE_PATH", "--db", "path", "./data/index.db",
            "SQLite file holding the index (created with its folder if missing)."),
    Setting("databases_dir", "DATABASES_DIR", "--databases-dir", "path", None,
            "Folder of the separate databases made by the create_database tool, one SQLite "
            "file each (default: a folder `databases` next to SQLITE_PATH).", optional=True),
    Setting("watch_dir", "WATCH_DIR", "--data-folder", "path", "./kb",
            "Folder of documents to index and watch."),
    Setting("model_id", "MODEL_ID", "--model-id", "str", DEFAULT_MODEL_ID,
            "fastembed model name. The default runs offline on the bundled int8 ONNX file; "
            "other catalogue models download on first use when a network is there."),
    Setting("model_path", "MODEL_PATH", "--model-path", "path", None,
            "A local fastembed-format model directory (model.onnx, tokenizer.json, "
            "tokenizer_config.json) used instead of downloading MODEL_ID.", optional=True),
    Setting("cache_dir", "POCKETMCP_CACHE", "--cache-dir", "path", None,
            "Where models are unpacked or downloaded (default: the user cache folder, "
            "e.g. ~/.cache/pocketmcp).", optional=True),
    Setting("chunk_size", "CHUNK_SIZE", "--chunk-size", "int", 1000,
            "Target chunk length in characters (chunks never exceed the model's token window).",
            minimum=100, maximum=20000),
    Setting("chunk_overlap", "CHUNK_OVERLAP", "--chunk-overlap", "int", 120,
            "Characters shared by neighbouring chunks.", minimum=0, maximum=10000),
    Setting("include", "INCLUDE_GLOBS", "--include", "list",
            "**/*.md,**/*.markdown,**/*.txt,**/*.rst,**/*.pdf,**/*.docx,**/*.html,**/*.htm,"
            "**/*.pptx,**/*.xlsx,**/*.epub,**/*.csv",
            "Comma-separated gitignore-style globs of files to index. PDF, Word, HTML, "
            "PowerPoint, Excel, EPUB and CSV files are converted to Markdown; other matches "
            "are read as text, and binary files of unknown formats are skipped and logged."),
    Setting("ignore", "IGNORE_PATTERNS", "--ignore", "list", "",
            "Comma-separated gitignore-style patterns to skip, on top of temp/editor files, "
            "dot files and the folder's .gitignore."),
    Setting("max_file_mb", "MAX_FILE_MB", "--max-file-mb", "int", 20,
            "Files larger than this many MiB are skipped and logged.", minimum=1,
            maximum=4096),
    Setting("convert_workers", "CONVERT_WORKERS", "--convert-workers", "int", 2,
            "Documents converted at once, each in its own worker process.", minimum=1,
            maximum=32),
    Setting("convert_timeout_s", "CONVERT_TIMEOUT_S", "--convert-timeout-s", "int", 60,
            "A conversion taking longer is stopped and the file skipped.", minimum=1,
            maximum=3600),
    Setting("convert_memory_mb", "CONVERT_MEMORY_MB", "--convert-memory-mb", "int", 1024,
            "Address-space cap of a conversion worker (Linux); a file needing more is "
            "skipped. Zip containers unpacking to more than half of it are refused.",
            minimum=256, maximum=65536),
    Setting("url_timeout_s", "URL_TIMEOUT_S", "--url-timeout-s", "int", 30,
            "Time limit of one ingest_url download (its size limit is MAX_FILE_MB).",
            minimum=1, maximum=600),
    Setting("default_library", "DEFAULT_LIBRARY", "--default-library", "str", "default",
            "Library of documents that name none."),
    Setting("library_from", "LIBRARY_FROM", "--library-from", "choice", "folder",
            "folder: a watched file's top folder names its library (kb/papers/a.pdf is in "
            "'papers'; files directly in WATCH_DIR are in DEFAULT_LIBRARY). none: every "
            "watched file is in DEFAULT_LIBRARY.", choices=("folder", "none")),
    Setting("allowed_roots", "ALLOWED_ROOTS", "--allowed-roots", "list", "",
            "Comma-separated folders ingest_file may read, besides WATCH_DIR."),
    Setting("debounce_ms", "DEBOUNCE_MS", "--debounce-ms", "int", 600,
            "Quiet time before a burst of file events is processed.", minimum=0,
            maximum=60000),
    Setting("read_concurrency", "READ_CONCURRENCY", "--read-concurrency", "int", 3,
            "Files read and hashed at once.", minimum=1, maximum=64),
    Setting("embed_batch_size", "EMBED_BATCH_SIZE", "--embed-batch-size", "int", 1,
            "Most chunks embedded in one model call. On CPUs one at a time is fastest "
            "(bench/ingest.py); larger batches pay off on many-core machines.",
            minimum=1, maximum=1024),
    Setting("embed_batch_tokens", "EMBED_BATCH_TOKENS", "--embed-batch-tokens", "int", 4096,
            "Most tokens (padded) in one model call; bounds the model's memory.",
            minimum=256, maximum=1_000_000),
    Setting("embed_threads", "EMBED_THREADS", "--embed-threads", "int", 0,
            "onnxruntime threads (0: one per core).", minimum=0, maximum=256),
    Setting("queue_size", "QUEUE_SIZE", "--queue-size", "int", 8,
            "Capacity of each stream between pipeline stages.", minimum=0, maximum=16),
    Setting("write_batch_files", "WRITE_BATCH_FILES", "--write-batch-files", "int", 32,
            "Most files committed in one transaction.", minimum=1, maximum=10000),
    Setting("tools", "TOOLS", "--tools", "list", "all",
            "Tools the MCP server offers: `all`, `core` (search, get_document, "
            "list_documents, list_libraries, status), or a comma list of tool names and sets "
            "(e.g. `core,upsert_documents`). Every offered tool's schema costs the client's "
            "model context on every turn."),
    Setting("log_level", "LOG_LEVEL", "--log-level", "choice", "info",
            "Log verbosity (logs go to stderr as JSON lines).",
            choices=("debug", "info", "warning", "error")),
)

_BY_FIELD = {s.field: s for s in SETTINGS}


class Config(msgspec.Struct, frozen=True, kw_only=True):
    sqlite_path: Path
    databases_dir: Path
    watch_dir: Path
    watch_dir_given: bool = False  # set by the environment or a flag, not the default
    model_id: str
    model_path: Path | None
    cache_dir: Path
    chunk_size: int
    chunk_overlap: int
    include: tuple[str, ...]
    ignore: tuple[str, ...]
    max_file_mb: int
    convert_workers: int
    convert_timeout_s: int
    convert_memory_mb: int
    url_timeout_s: int
    default_library: str
    library_from: str
    allowed_roots: tuple[str, ...]
    debounce_ms: int
    read_concurrency: int
    embed_batch_size: int
    embed_batch_tokens: int
    embed_threads: int
    queue_size: int
    write_batch_files: int
    tools: tuple[str, ...]
    log_level: str

    @property
    def max_file_bytes(self) -> int:
        return self.max_file_mb * 1024 * 1024

    def library_of(self, rel: str) -> str:
        """The library of the watched file at `rel` (POSIX, relative to WATCH_DIR)."""
        if self.library_from == "folder" and "/" in rel:
            return rel.split("/", 1)[0]
        return self.default_library

    def roots(self) -> tuple[Path, ...]:
        """Folders ingest_file may read: WATCH_DIR and ALLOWED_ROOTS, symlinks resolved."""
        found = [self.watch_dir, *(Path(os.path.expanduser(r)) for r in self.allowed_roots)]
        return tuple(p.resolve() for p in found)

    def replace(self, **changes: Any) -> Config:
        return msgspec.structs.replace(self, **changes)


def _parse(setting: Setting, raw: object, source: str) -> Any:
    if raw is None or (isinstance(raw, str) and raw.strip() == "" and setting.optional):
        if setting.optional:
            return None
        raw = setting.default
    if setting.kind == "path":
        text = str(raw).strip()
        if not text:
            raise ConfigError(source, raw, "a file system path")
        return Path(os.path.expanduser(text))
    if setting.kind == "str":
        text = str(raw).strip()
        if not text:
            raise ConfigError(source, raw, "a non-empty string")
        return text
    if setting.kind == "list":
        items = raw if isinstance(raw, list | tuple) else str(raw).split(",")
        return tuple(item.strip() for item in items if str(item).strip())
    if setting.kind == "choice":
        text = str(raw).strip().lower()
        if text not in setting.choices:
            raise ConfigError(source, raw, "one of " + ", ".join(setting.choices))
        return text
    accepts = f"a whole number from {setting.minimum} to {setting.maximum}"
    try:
        number = int(str(raw).strip().replace("_", ""))
    except ValueError:
        raise ConfigError(source, raw, accepts) from None
    if (setting.minimum is not None and number < setting.minimum) or (
        setting.maximum is not None and number > setting.maximum
    ):
        raise ConfigError(source, raw, accepts)
    return number


def load(
    overrides: Mapping[str, object] | None = None,
    environ: Mapping[str, str] | None = None,
) -> Config:
    """Build the Config: defaults, then the environment, then `overrides` (CLI flags).

    `overrides` is keyed by field name; None values are ignored.
    """
    env = os.environ if environ is None else environ
    overrides = overrides or {}
    values: dict[str, Any] = {}
    for setting in SETTINGS:
        if overrides.get(setting.field) is not None:
            values[setting.field] = _parse(setting, overrides[setting.field], setting.flag)
        elif setting.env in env:
            values[setting.field] = _parse(setting, env[setting.env], setting.env)
        else:
            values[setting.field] = _parse(setting, setting.default, setting.env)
    values["watch_dir_given"] = (overrides.get("watch_dir") is not None
                                 or "WATCH_DIR" in env)
    if values["databases_dir"] is None:
        values["databases_dir"] = values["sqlite_path"].parent / "databases"
    if values["cache_dir"] is None:
        base = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        values["cache_dir"] = Path(base) / "pocketmcp"
    if values["chunk_overlap"] >= values["chunk_size"]:
        raise ConfigError("CHUNK_OVERLAP", values["chunk_overlap"],
                          f"a number smaller than CHUNK_SIZE ({values['chunk_size']})")
    if not values["include"]:
        raise ConfigError("INCLUDE_GLOBS", "", "at least one glob such as **/*.md")
    values["tools"] = _tools(values["tools"])
    return Config(**values)


def _tools(names: tuple[str, ...]) -> tuple[str, ...]:
    """TOOLS as tool names in their canonical order: sets expanded, duplicates dropped."""
    wanted: set[str] = set()
    for name in names:
        if name in TOOL_SETS:
            wanted.update(TOOL_SETS[name])
        elif name in TOOL_NAMES:
            wanted.add(name)
        else:
            raise ConfigError("TOOLS", ",".join(names), "`all`, `core` or a comma list of "
                              "tool names: " + ", ".join(TOOL_NAMES))
    if not wanted:
        raise ConfigError("TOOLS", "", "at least one tool name or set (all, core)")
    return tuple(name for name in TOOL_NAMES if name in wanted)


def setting(field: str) -> Setting:
    return _BY_FIELD[field]


def settings_table() -> str:
    """The README's table of settings, made from SETTINGS."""
    rows = ["| Variable | Flag | Default | Meaning |", "| --- | --- | --- | --- |"]
    for s in SETTINGS:
        default = "" if s.default is None else f"`{s.default}`"
        if s.minimum is not None:
            default += f" ({s.minimum}-{s.maximum})"
        if s.choices:
            default += " (" + ", ".join(s.choices) + ")"
        rows.append(f"| `{s.env}` | `{s.flag}` | {default} | {s.help} |")
    return "\n".join(rows)


def env_example() -> str:
    """The text of .env.example, made from SETTINGS."""
    lines = ["# PocketMCP settings. Export them, or put them in your MCP client's \"env\" block.",
             "# Command-line flags override them. Empty means the default.", ""]
    for s in SETTINGS:
        lines.append(f"# {s.help} (flag {s.flag})")
        default = "" if s.default is None else s.default
        lines.append(f"{s.env}={default}")
        lines.append("")
    return "\n".join(lines)
