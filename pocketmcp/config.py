"""The settings of a run: each part's, as the part declares them (settings.py says how), read
by `load`, the only reader of os.environ, into one root of parts (`Config`)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import msgspec

from pocketmcp import indexes
from pocketmcp.convert.limits import Limits, ocr_threads
from pocketmcp.convert.ocr import missing as ocr_missing
from pocketmcp.core.net import is_loopback
from pocketmcp.core.secret import Secret
from pocketmcp.embed.settings import EmbedSettings
from pocketmcp.errors import ConfigError
from pocketmcp.mcp.settings import ServeSettings, tool_names
from pocketmcp.ops.settings import IngestSettings
from pocketmcp.pipeline.budget import threads_within
from pocketmcp.pipeline.settings import PipelineSettings, Watched
from pocketmcp.settings import ON_AN_INDEX, Declared, Setting, build, declared, parse, shown
from pocketmcp.store.places import StoreSettings, main_place

if TYPE_CHECKING:  # numpy and the store's interfaces: a stdio bridge imports this module
    from pocketmcp.store.api import Place

replace = msgspec.structs.replace
REMOTE_BATCH_SIZE = 100  # inputs per request to a remote provider
REMOTE_BATCH_TOKENS = 100_000  # summed tokens per request (OpenAI takes up to 300k)


class Config(msgspec.Struct, frozen=True, kw_only=True):
    """Every part's settings."""

    store: StoreSettings
    pipeline: PipelineSettings  # with the watched folder
    embed: EmbedSettings
    convert: Limits
    ingest: IngestSettings
    serve: ServeSettings
    log_level: Annotated[Literal["debug", "info", "warning", "error"], Setting("LOG_LEVEL",
        used_by=(*ON_AN_INDEX, "init", "eval"),
        help="Log verbosity (logs go to stderr as JSON lines).")] = "info"

    @property
    def watched(self) -> Watched:
        return self.pipeline.watched

    def main_place(self) -> Place:
        """Where the main index is (a SQLite file, or a Postgres schema)."""
        return main_place(self.store)

    def fed_from(self, folder: Path) -> Config:
        """These settings fed from `folder`, as if WATCH_DIR named it."""
        watched = replace(self.watched, root=folder, given=True)
        return replace(self, pipeline=replace(self.pipeline, watched=watched),
                       ingest=replace(self.ingest, watched=watched))

    def at_index(self, index: Path, folder: Path) -> Config:
        """These settings on the index in the file `index` (the folder rule's), fed from
        `folder`."""
        return replace(self, store=self.store.with_file(index)).fed_from(folder)


@cache
def declarations() -> tuple[Declared, ...]:
    """Every declared setting, each once, in the order the parts list them."""
    found: dict[str, Declared] = {}
    for entry in declared(Config):
        found.setdefault(entry.setting.env, entry)
    return tuple(found.values())


def load(overrides: Mapping[str, object] | None = None,
         environ: Mapping[str, str] | None = None) -> Config:
    """The settings: defaults, then the environment, then `overrides` (CLI flags), which are
    keyed by variable (None values are ignored)."""
    env = os.environ if environ is None else environ
    overrides = overrides or {}
    values: dict[str, Any] = {}
    for entry in declarations():
        var = entry.setting.env
        if overrides.get(var) is not None:
            values[var] = parse(entry, overrides[var], entry.setting.flag or var)
        else:
            values[var] = parse(entry, env[var], var) if var in env else entry.default
    config = build(Config, values)
    if not config.watched.include:
        raise ConfigError("INCLUDE_GLOBS", "", "at least one glob such as **/*.md")
    serve = replace(config.serve, tools=tool_names(config.serve.tools),
                    started_by="editor" if env.get("POCKETMCP_STARTED_BY") == "editor"
                    else "user")
    if (serve.transport != "stdio" and serve.token is None and not is_loopback(serve.host)):
        raise ConfigError("MCP_HOST", serve.host,
                          "a loopback address (127.0.0.1, localhost, ::1) unless "
                          "POCKETMCP_TOKEN is set: listening beyond this machine needs a "
                          "token you chose")
    given = overrides.get("WATCH_DIR") is not None or "WATCH_DIR" in env
    folder = config.watched.root if given or config.watched.root.is_dir() else Path.cwd()
    store = config.store.by_rule(lambda: indexes.index_for(folder))  # the folder's, by rule
    store.check()
    embed = _embedding(config.embed, overrides, env)
    embed = replace(embed, index_threads=threads_within(config.pipeline.cpu_budget))
    ocr = replace(config.convert.ocr, threads=ocr_threads(embed.index_threads))
    if ocr.mode == "on" and (why := ocr_missing()):
        raise ConfigError("OCR", "on", f"auto or off: {why}")
    max_bytes = config.pipeline.max_file_bytes
    config = replace(config, store=store, embed=embed, serve=serve,
                     convert=replace(config.convert, max_chars=max_bytes, ocr=ocr,
                                     ocr_budget_s=2 * config.convert.timeout_s),
                     ingest=replace(config.ingest, max_file_bytes=max_bytes))
    return config.fed_from(config.watched.root) if given else config


def _embedding(embed: EmbedSettings, overrides: Mapping[str, object],
               env: Mapping[str, str]) -> EmbedSettings:
    """What the provider and the environment make of the embedding settings: the batching
    of the provider's kind, the cache folder, and the API key from the variable named."""
    local = embed.provider == "local"
    name = embed.api_key_env
    if not name.replace("_", "").isalnum():
        raise ConfigError("EMBED_API_KEY_ENV", name, "the name of an environment variable")
    key = env.get(name, "").strip()
    # Ollama takes no key: one is sent there (to a proxy in front of it) only when named.
    named = "EMBED_API_KEY_ENV" in env or overrides.get("EMBED_API_KEY_ENV") is not None
    if embed.provider == "ollama" and not named:
        key = ""
    url = embed.base_url
    if url is not None and not url.lower().startswith(("http://", "https://")):
        raise ConfigError("--embed-base-url" if overrides.get("EMBED_BASE_URL")
                          else "EMBED_BASE_URL", url, "an http:// or https:// address")
    cache = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return replace(embed, cache_dir=Path(cache) / "pocketmcp",
                   api_key=Secret(key) if key else None,
                   batch_size=1 if local else REMOTE_BATCH_SIZE,
                   batch_tokens=4096 if local else REMOTE_BATCH_TOKENS)


def child_environment(config: Config, **changes: str) -> dict[str, str]:
    """This process's environment with every setting of `config` written back into its
    variable (then `changes`): a child process started with it loads the same settings,
    flags included. WATCH_DIR is left out unless it was given (its default is relative)."""
    env = dict(os.environ)
    for entry in declarations():
        var = entry.setting.env
        if var == "WATCH_DIR" and not config.watched.given:
            continue
        value: Any = config
        for name in entry.path:
            value = getattr(value, name)
        if value is None:
            env.pop(var, None)
        else:
            env[var] = shown(entry, value)
    env.update(changes)
    return env
