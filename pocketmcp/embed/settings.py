"""What the embedders read of the settings: the model, the provider and how to reach it."""

from __future__ import annotations

from pathlib import Path

import msgspec

from pocketmcp.core.secret import Secret


class EmbedSettings(msgspec.Struct, frozen=True, kw_only=True):
    model_id: str  # MODEL_ID: the built-in provider's model
    model_path: Path | None  # MODEL_PATH: a fastembed-format folder instead
    cache_dir: Path
    provider: str  # EMBED_PROVIDER: local, openai or ollama
    base_url: str | None
    model: str | None  # EMBED_MODEL: a remote provider's model
    dimensions: int | None
    api_key_env: str  # EMBED_API_KEY_ENV: the name of the variable holding the key
    api_key: Secret | None  # read from the variable api_key_env names
    doc_prefix: str | None
    query_prefix: str | None
    input_type: str  # auto, on or off
    max_tokens: int | None
    batch_size: int
    batch_tokens: int
    threads: int
    concurrency: int
    timeout_s: float
    retries: int
    retry_base_s: float
    idle_unload_s: int = 0  # MODEL_IDLE_UNLOAD_S: the built-in model unloaded when idle (0: never)
    index_threads: int = 0  # INDEX_THREADS: threads of the documents' session (0: per core)
