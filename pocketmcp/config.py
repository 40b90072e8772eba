"""Settings: the only module that reads os.environ.

Every setting has one entry in `settings.SETTINGS`, which gives its environment variable, its
CLI flag, its type, default and help; `load` reads them into a `Config`. From it the entry
layer builds, once, the small settings that embed/, convert/, the pipeline and ingest take
(`embed_settings`, `convert_limits`, `pipeline_settings`, `ingest_settings`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from pocketmcp import indexes
from pocketmcp.convert.limits import Limits, OcrLimits
from pocketmcp.convert.ocr import missing as ocr_missing
from pocketmcp.core.net import is_loopback
from pocketmcp.core.secret import Secret
from pocketmcp.embed.settings import EmbedSettings
from pocketmcp.errors import ConfigError
from pocketmcp.ops.settings import IngestSettings
from pocketmcp.pipeline.settings import PipelineSettings, Watched
from pocketmcp.settings import SETTINGS, TOOL_NAMES, TOOL_SETS, Setting, setting
from pocketmcp.store.places import StoreSettings, main_place

if TYPE_CHECKING:  # numpy and the store's interfaces: a stdio bridge imports this module
    from pocketmcp.store.api import Place


class Config(msgspec.Struct, frozen=True, kw_only=True):
    sqlite_path: Path
    sqlite_path_given: bool = False  # SQLITE_PATH or --db; else the rule (indexes.py)
    databases_dir: Path
    databases_dir_given: bool = False
    watch_dir: Path
    watch_dir_given: bool = False  # set by the environment or a flag, not the default
    model_id: str
    model_path: Path | None
    cache_dir: Path
    embed_provider: str
    embed_base_url: str | None
    embed_model: str | None
    embed_dimensions: int | None
    embed_api_key_env: str
    embed_api_key: Secret | None = None  # read from the variable EMBED_API_KEY_ENV names
    embed_doc_prefix: str | None
    embed_query_prefix: str | None
    embed_input_type: str
    embed_max_tokens: int | None
    chunk_size: int
    chunk_overlap: int
    max_chunks_per_doc: int
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
    embed_concurrency: int
    embed_timeout_s: float
    embed_retries: int
    embed_retry_base_s: float
    queue_size: int
    write_batch_files: int
    tools: tuple[str, ...]
    transport: str
    host: str
    port: int
    token: Secret | None
    allowed_hosts: tuple[str, ...]
    allowed_origins: tuple[str, ...]
    log_level: str
    share: str = "on"
    server_idle_exit_s: int = 300
    started_by: str = "user"
    model_idle_unload_s: int = 900
    index_threads: int = 0
    index_cpu_budget: int = 0
    store: str = "sqlite"
    database_url: Secret | None = None
    pg_schema: str = "pocketmcp"
    pg_ef_search: int = 1000
    pg_hnsw_m: int = 16
    pg_hnsw_ef_construction: int = 64
    search_timeout_s: float = 30.0
    ocr: str = "auto"
    ocr_max_pixels: int = 40_000_000
    ocr_max_pages: int = 100
    ocr_threads: int = 0
    ocr_memory_mb: int = 2048
    ocr_model_dir: Path | None = None

    @property
    def max_file_bytes(self) -> int:
        return self.max_file_mb * 1024 * 1024

    # -- each part's settings, built once by the entry layer ----------------------------------

    def embed_settings(self) -> EmbedSettings:
        return EmbedSettings(
            model_id=self.model_id, model_path=self.model_path, cache_dir=self.cache_dir,
            provider=self.embed_provider, base_url=self.embed_base_url,
            model=self.embed_model, dimensions=self.embed_dimensions,
            api_key_env=self.embed_api_key_env, api_key=self.embed_api_key,
            doc_prefix=self.embed_doc_prefix, query_prefix=self.embed_query_prefix,
            input_type=self.embed_input_type, max_tokens=self.embed_max_tokens,
            batch_size=self.embed_batch_size, batch_tokens=self.embed_batch_tokens,
            threads=self.embed_threads, concurrency=self.embed_concurrency,
            timeout_s=self.embed_timeout_s, retries=self.embed_retries,
            retry_base_s=self.embed_retry_base_s, idle_unload_s=self.model_idle_unload_s,
            index_threads=self.index_threads)

    def convert_limits(self, ocr_cache: Path | None = None) -> Limits:
        """The bounds of conversion; OCR's text is kept in `ocr_cache` (the index's own
        `ocr` folder: it goes with the index) when given."""
        return Limits(workers=self.convert_workers, timeout_s=self.convert_timeout_s,
                      memory_mb=self.convert_memory_mb, max_chars=self.max_file_bytes,
                      max_unpacked=self.convert_memory_mb * 2**20 // 2,
                      ocr=self.ocr_limits(ocr_cache))

    def ocr_limits(self, cache: Path | None) -> OcrLimits:
        cores = (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                 else os.cpu_count() or 1)
        return OcrLimits(
            mode=self.ocr, max_pixels=self.ocr_max_pixels, max_pages=self.ocr_max_pages,
            threads=self.ocr_threads or max(1, cores - 1), memory_mb=self.ocr_memory_mb,
            model_dir=str(self.ocr_model_dir) if self.ocr_model_dir else None,
            cache_dir=cache)

    def watched(self) -> Watched:
        return Watched(root=self.watch_dir, include=self.include, ignore=self.ignore,
                       default_library=self.default_library, library_from=self.library_from)

    def pipeline_settings(self) -> PipelineSettings:
        return PipelineSettings(
            watched=self.watched(), max_file_bytes=self.max_file_bytes,
            debounce_ms=self.debounce_ms, read_concurrency=self.read_concurrency,
            queue_size=self.queue_size, max_chunks_per_doc=self.max_chunks_per_doc,
            embed_batch_size=self.embed_batch_size, embed_batch_tokens=self.embed_batch_tokens,
            cpu_budget=self.index_cpu_budget)

    def ingest_settings(self) -> IngestSettings:
        return IngestSettings(
            watched=self.watched(),
            allowed_roots=tuple(Path(os.path.expanduser(r)) for r in self.allowed_roots),
            max_file_bytes=self.max_file_bytes, url_timeout_s=self.url_timeout_s)

    def store_settings(self) -> StoreSettings:
        return StoreSettings(
            store=self.store, sqlite_path=self.sqlite_path,  # type: ignore[arg-type]
            named_file=self.sqlite_path_given, databases_dir=self.databases_dir,
            database_url=self.database_url,
            pg_schema=self.pg_schema, pg_ef_search=self.pg_ef_search,
            pg_hnsw_m=self.pg_hnsw_m, pg_hnsw_ef_construction=self.pg_hnsw_ef_construction)

    def main_place(self) -> Place:
        """Where the main index is (a SQLite file, or a Postgres schema)."""
        return main_place(self.store_settings())

    def at_index(self, index: Path, folder: Path | None) -> Config:
        """These settings on the index at `index` (its named databases beside it unless
        DATABASES_DIR says otherwise), fed from `folder` when given."""
        changes: dict[str, Any] = {"sqlite_path": index}
        if not self.databases_dir_given:
            changes["databases_dir"] = index.parent / "databases"
        if folder is not None:
            changes.update(watch_dir=folder, watch_dir_given=True)
        return self.replace(**changes)

    def replace(self, **changes: Any) -> Config:
        return msgspec.structs.replace(self, **changes)


def _parse(setting: Setting, raw: object, source: str) -> Any:
    if raw is None or (isinstance(raw, str) and raw.strip() == "" and setting.optional):
        if setting.optional:
            return None
        raw = setting.default
    if setting.kind == "text":  # kept as given, spaces included: prefixes end in one
        text = str(raw)
        return "" if text.strip().lower() == "none" else text.replace("\\n", "\n")
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
    if setting.kind == "secret":
        text = str(raw).strip()
        if not text or any(c.isspace() or not c.isprintable() for c in text):
            raise ConfigError(source, "***", "printable characters without spaces")
        return Secret(text)
    if setting.kind == "list":
        items = raw if isinstance(raw, list | tuple) else str(raw).split(",")
        return tuple(item.strip() for item in items if str(item).strip())
    if setting.kind == "choice":
        text = str(raw).strip().lower()
        if text not in setting.choices:
            raise ConfigError(source, raw, "one of " + ", ".join(setting.choices))
        return text
    if setting.kind == "float":
        accepts = f"a number from {setting.minimum:g} to {setting.maximum:g}"
        try:
            value = float(str(raw).strip())
        except ValueError:
            raise ConfigError(source, raw, accepts) from None
        if (setting.minimum is not None and not value >= setting.minimum) or (
            setting.maximum is not None and not value <= setting.maximum
        ):  # `not >=` also refuses nan
            raise ConfigError(source, raw, accepts)
        return value
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
    for entry in SETTINGS:
        if overrides.get(entry.field) is not None:
            values[entry.field] = _parse(entry, overrides[entry.field], entry.flag)
        elif entry.env in env:
            values[entry.field] = _parse(entry, env[entry.env], entry.env)
        else:
            values[entry.field] = _parse(entry, entry.default, entry.env)
    values["watch_dir_given"] = (overrides.get("watch_dir") is not None
                                 or "WATCH_DIR" in env)
    values["sqlite_path_given"] = values["sqlite_path"] is not None
    values["databases_dir_given"] = values["databases_dir"] is not None
    if values["sqlite_path"] is None:  # the folder's index, by the rule
        folder = values["watch_dir"]
        if not values["watch_dir_given"] and not folder.is_dir():
            folder = Path.cwd()  # nothing named: the current directory's
        values["sqlite_path"] = indexes.index_for(folder)
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
    if (values["transport"] != "stdio" and values["token"] is None
            and not is_loopback(values["host"])):
        raise ConfigError("MCP_HOST", values["host"],
                          "a loopback address (127.0.0.1, localhost, ::1) unless "
                          "POCKETMCP_TOKEN is set: listening beyond this machine needs a "
                          "token you chose")
    _embedding(values, overrides, env)
    if values["ocr"] == "on" and (why := ocr_missing()):
        raise ConfigError("OCR", "on", f"auto or off: {why}")
    config = Config(**values)
    config.store_settings().check()
    return config


REMOTE_BATCH_SIZE = 100  # inputs per request to a remote provider, by default
REMOTE_BATCH_TOKENS = 100_000  # summed tokens per request (OpenAI takes up to 300k)


def _embedding(values: dict[str, Any], overrides: Mapping[str, object],
               env: Mapping[str, str]) -> None:
    """Defaults that depend on the provider, and the API key from the variable named."""
    local = values["embed_provider"] == "local"
    if values["embed_batch_size"] is None:
        values["embed_batch_size"] = 1 if local else REMOTE_BATCH_SIZE
    if values["embed_batch_tokens"] is None:
        values["embed_batch_tokens"] = 4096 if local else REMOTE_BATCH_TOKENS
    name = values["embed_api_key_env"]
    if not name.replace("_", "").isalnum():
        raise ConfigError("EMBED_API_KEY_ENV", name, "the name of an environment variable")
    key = env.get(name, "").strip()
    # Ollama takes no key: one is sent there (to a proxy in front of it) only when named.
    named = "EMBED_API_KEY_ENV" in env or overrides.get("embed_api_key_env") is not None
    if values["embed_provider"] == "ollama" and not named:
        key = ""
    values["embed_api_key"] = Secret(key) if key else None
    url = values["embed_base_url"]
    if url is not None and not url.lower().startswith(("http://", "https://")):
        raise ConfigError(setting("embed_base_url").flag if overrides.get("embed_base_url")
                          else "EMBED_BASE_URL", url, "an http:// or https:// address")


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


def child_environment(config: Config, **changes: str) -> dict[str, str]:
    """This process's environment with every setting of `config` written back into its
    variable (then `changes`): a child process started with it loads the same settings,
    flags included. WATCH_DIR is left out unless it was given (its default is relative), and
    DATABASES_DIR too (its default comes from the index's place)."""
    env = dict(os.environ)
    for entry in SETTINGS:
        if entry.field == "watch_dir" and not config.watch_dir_given:
            continue
        if entry.field == "databases_dir" and not config.databases_dir_given:
            env.pop(entry.env, None)
            continue
        value = getattr(config, entry.field, None)
        if value is None:
            env.pop(entry.env, None)
            continue
        if entry.kind == "secret":
            text = value.reveal()
        elif entry.kind == "list":
            text = ",".join(value)
        elif entry.kind == "text":
            text = "none" if value == "" else value.replace("\n", "\\n")
        else:
            text = str(value)
        env[entry.env] = text
    env.update(changes)
    return env
