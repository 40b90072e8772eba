"""What the status and health answers give (the status tool, `/health`, the page, the CLI's
progress): the models of how a process and its index stand, beside the operations' own
results in ops/results.py."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class EmbeddingStatus(BaseModel):
    provider: str = Field(description="local (the built-in model), openai or ollama.")
    model: str
    dimensions: int
    doc_prefix: str
    query_prefix: str
    url: str | None = Field(description="The provider's endpoint (remote providers).")
    available: bool = Field(description="False while the provider is taken to be down.")
    retry_in_s: float | None = Field(description="When it is tried again, while it is down.")
    calls: int = Field(description="Requests (or model calls) since start.")
    inputs: int = Field(description="Texts embedded since start.")
    tokens: int = Field(description="Tokens sent, as the provider counted them when it says.")
    retries: int
    failures: int = Field(description="Calls that failed after their retries.")
    seconds: float = Field(description="Time spent in the model or waiting for the provider.")
    last_error: str | None


class ServingStatus(BaseModel):
    """How this process serves, and what it holds in memory."""

    serving: str = Field(description="shared: the HTTP server every editor of this index "
                                     "shares; alone: a server for the one client that "
                                     "started it.")
    clients: int | None = Field(None, description="Clients attached to a shared server.")
    model_state: str | None = Field(None, description="loaded, unloaded (after "
                                    "MODEL_IDLE_UNLOAD_S unused) or loading; none for a "
                                    "remote provider.")
    model_unloads: int = 0
    model_reload_s: float | None = Field(None, description="How long the model's last load "
                                         "after an unload took.")
    memory_mib: float | None = Field(None, description="This process's resident memory.")


class StatusResult(BaseModel):
    phase: str
    role: str = Field(description="writer: this process indexes; reader: another one does.")
    model: str
    model_ready: bool
    dimensions: int | None
    index_path: str
    watch_dir: str | None
    documents: int | None
    chunks: int | None
    initial_indexing_done: bool
    queue_depths: dict[str, dict[str, int]]
    files_indexed_since_start: int
    last_error: str | None
    embedding: EmbeddingStatus | None = None
    chunks_waiting: int | None = Field(
        default=None, description="Chunks searchable by keywords, still waiting for vectors.")
    vectors_eta_s: float | None = Field(
        default=None, description="Expected seconds until they have them, at the embedding "
                                  "speed measured since start (null: not known yet).")
    ocr: str | None = Field(None, description="OCR of images and scanned pages: on, or off "
                                              "and why.")
    sharing: ServingStatus | None = None
    version: str
    search_check: dict[str, Any] | None = Field(default=None, description=(
        "With check_search: hit@1, hit@5 and MRR@10 per mode on questions made from the "
        "documents, and the fusion weight that did best."))


class SkippedFile(BaseModel):
    path: str
    reason: str


class IndexProgress(BaseModel):
    """Counters of the watched folder's pipeline since this process started."""

    files_seen: int
    files_added: int
    files_updated: int
    files_removed: int
    files_unchanged: int
    files_skipped: int = Field(description="Files that could not be read or converted.")
    recent_skips: list[SkippedFile] = Field(description="The latest skipped files, newest "
                                                        "last, with why.")
    files_in_flight: int = Field(description="Files read and not yet committed.")
    chunks_embedded: int
    chunks_per_second: float | None = Field(description="Chunks embedded per second of "
                                                        "embedding time.")
    scan_done: bool
    last_error: str | None
    index_bytes: int = Field(description="Size of the index file and its write-ahead log.")


class HealthResult(BaseModel):
    """What a supervisor or a container probe learns without a token: no paths, no counts."""

    alive: bool = Field(description="false only when start-up failed for good.")
    ready: bool = Field(description="the model is loaded, the index open and, when a folder "
                                    "is watched, its first scan done.")
    phase: str
    role: str
    model_ready: bool
    initial_indexing_done: bool
    version: str
