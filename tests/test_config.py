"""The settings: each declared once by the part that reads it, read by config.load alone."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest
import structlog

from pocketmcp.config import child_environment, declarations, load
from pocketmcp.convert.limits import ocr_threads
from pocketmcp.embed.settings import EmbedSettings
from pocketmcp.errors import ConfigError
from pocketmcp.indexes import index_for
from pocketmcp.pipeline.budget import threads_within
from pocketmcp.settings import FEEDING, WRITING, env_example, settings_table

# Settings a user no longer sets: constants, derived values, and two merged into one.
REMOVED = {"DATABASES_DIR": "/elsewhere", "POCKETMCP_CACHE": "/elsewhere",
           "MODEL_PATH": "/elsewhere", "MODEL_ID": "BAAI/bge-small-en-v1.5",
           "EMBED_INPUT_TYPE": "bad", "CHUNK_OVERLAP": "99999", "MAX_CHUNKS_PER_DOC": "1",
           "OCR_MAX_PIXELS": "1", "OCR_MAX_PAGES": "0", "OCR_THREADS": "99",
           "OCR_MEMORY_MB": "1", "URL_TIMEOUT_S": "0", "EMBED_BATCH_SIZE": "5000",
           "EMBED_BATCH_TOKENS": "1", "EMBED_THREADS": "99", "EMBED_TIMEOUT_S": "nan",
           "EMBED_RETRIES": "99", "EMBED_RETRY_BASE_S": "0", "WRITE_BATCH_FILES": "0",
           "PG_HNSW_M": "32", "PG_HNSW_EF_CONSTRUCTION": "48",
           "MCP_ALLOWED_ORIGINS": "http://evil.example", "CONVERT_MEMORY_MB": "1",
           "DEFAULT_LIBRARY": "notes", "LIBRARY_FROM": "bad", "INDEX_THREADS": "99"}


def test_defaults_match_the_documented_values() -> None:
    config = load({}, environ={})
    assert config.store.sqlite_path == index_for(Path.cwd())  # no ./kb here: this folder's
    assert not config.store.named_file
    databases = config.main_place().database("x").describe()
    assert Path(databases) == (config.store.sqlite_path.parent / "databases" / "x.db").resolve()
    assert config.watched.root == Path("kb")
    assert (config.pipeline.chunk_size, config.pipeline.chunk_overlap) == (1000, 120)
    assert config.pipeline.debounce_ms == 600
    assert config.pipeline.read_concurrency == 3
    assert config.watched.include[:2] == ("**/*.md", "**/*.markdown")
    assert {"**/*.pdf", "**/*.docx", "**/*.html", "**/*.txt"} <= set(config.watched.include)
    assert config.embed.model is None
    assert (config.watched.default_library, config.watched.library_from) == ("default",
                                                                             "folder")
    assert (config.convert.timeout_s, config.convert.memory_mb) == (60, 1024)


def test_watched_files_map_to_libraries_by_top_folder() -> None:
    watched = load({}, environ={}).watched
    assert watched.library_of("papers/2024/a.pdf") == "papers"
    assert watched.library_of("todo.md") == "default"
    flat = load({}, environ={"LIBRARY": "notes"}).watched
    assert flat.library_of("papers/a.pdf") == "notes"
    assert flat.library_of("todo.md") == "notes"
    assert (flat.default_library, flat.library_from) == ("notes", "none")


def test_flags_override_the_environment() -> None:
    config = load({"CHUNK_SIZE": "500"}, environ={"CHUNK_SIZE": "800", "CHUNK_OVERLAP": "50"})
    assert config.pipeline.chunk_size == 500
    assert config.pipeline.chunk_overlap == 60  # 12% of CHUNK_SIZE: CHUNK_OVERLAP is not read


def test_removed_settings_are_no_longer_read() -> None:
    assert load({}, environ=REMOVED) == load({}, environ={})
    assert not any(e.setting.env in REMOVED for e in declarations())
    assert "POCKETMCP_STARTED_BY" not in {e.setting.env for e in declarations()}


def test_what_replaces_the_removed_settings() -> None:
    config = load({}, environ={"INDEX_CPU_BUDGET": "30"})
    assert config.pipeline.max_chunks_per_doc == 1000
    assert config.pipeline.write_batch_files == 32
    assert config.ingest.url_timeout_s == 30
    assert (config.store.pg_hnsw_m, config.store.pg_hnsw_ef_construction) == (16, 64)
    assert (config.convert.memory_mb, config.convert.ocr.memory_mb) == (1024, 2048)
    assert (config.convert.ocr.max_pixels, config.convert.ocr.max_pages) == (40_000_000, 100)
    assert config.embed.index_threads == threads_within(30)  # INDEX_THREADS: the budget's share
    assert config.convert.ocr.threads == ocr_threads(threads_within(30))
    assert [threads_within(p, 2) for p in (0, 10, 50, 51, 100)] == [0, 1, 1, 2, 2]
    assert [threads_within(p, 8) for p in (25, 30, 100)] == [2, 3, 8]
    assert load({}, environ={}).convert.ocr.threads == ocr_threads(0)
    assert [ocr_threads(0, cores) for cores in (1, 2, 8)] == [1, 1, 7]  # a core for searches
    assert [ocr_threads(3, 8), ocr_threads(16, 8), ocr_threads(2, 2)] == [3, 7, 1]
    embed = config.embed
    assert (embed.timeout_s, embed.retries, embed.retry_base_s, embed.threads) == (
        60.0, 4, 0.5, 0)
    assert embed.cache_dir == Path.home() / ".cache" / "pocketmcp"
    cached = load({}, environ={"XDG_CACHE_HOME": "/var/cache/me"}).embed.cache_dir
    assert cached == Path("/var/cache/me/pocketmcp")


def test_allowed_origins_are_the_pages_of_the_allowed_hosts() -> None:
    from pocketmcp.mcp.http import allowed  # the MCP SDK's settings type

    security = allowed(8765, bound="127.0.0.1", hosts=("notes.lan", "wiki.lan:443"))
    origins = security.allowed_origins or []
    assert {"http://127.0.0.1:8765", "http://localhost:8765"} <= set(origins)
    assert {"http://notes.lan:8765", "https://notes.lan:8765", "http://wiki.lan:443",
            "https://wiki.lan:443"} <= set(origins)
    assert "https://127.0.0.1:8765" not in origins


@pytest.mark.parametrize(
    ("env", "variable"),
    [
        ({"CHUNK_SIZE": "big"}, "CHUNK_SIZE"),
        ({"CHUNK_SIZE": "5"}, "CHUNK_SIZE"),
        ({"QUEUE_SIZE": "1000"}, "QUEUE_SIZE"),
        ({"LOG_LEVEL": "loud"}, "LOG_LEVEL"),
        ({"CHUNK_SIZE": "200000"}, "CHUNK_SIZE"),
        ({"INCLUDE_GLOBS": " , "}, "INCLUDE_GLOBS"),
    ],
)
def test_a_bad_value_names_the_variable_and_what_it_accepts(env, variable) -> None:
    with pytest.raises(ConfigError) as caught:
        load({}, environ=env)
    assert caught.value.variable == variable
    assert variable in str(caught.value)
    assert "accepts" in str(caught.value)


def test_a_bad_flag_names_the_flag() -> None:
    with pytest.raises(ConfigError, match="--read-concurrency"):
        load({"READ_CONCURRENCY": "0"}, environ={})


def test_a_flag_is_its_variables_name_and_the_commands_the_parts_unless_declared() -> None:
    by_env = {e.setting.env: e.setting for e in declarations()}
    assert by_env["CHUNK_SIZE"].flag == "--chunk-size"
    assert by_env["MODEL_IDLE_UNLOAD_S"].flag == "--model-idle-unload-s"
    assert (by_env["WATCH_DIR"].flag, by_env["SQLITE_PATH"].flag) == ("--data-folder", "--db")
    # a secret is never a flag: command lines are visible to other users
    assert by_env["POCKETMCP_TOKEN"].flag == by_env["DATABASE_URL"].flag == ""
    assert by_env["EMBED_PROVIDER"].used_by == EmbedSettings.USED_BY == (*WRITING, "doctor")
    assert by_env["EMBED_CONCURRENCY"].used_by == WRITING
    assert by_env["CHUNK_SIZE"].used_by == FEEDING


def test_env_example_lists_every_setting() -> None:
    text = env_example(declarations())
    for entry in declarations():
        assert f"\n{entry.setting.env}=" in text
    assert len(declarations()) <= 40


def test_the_committed_env_example_and_settings_page_are_current() -> None:
    root = Path(__file__).resolve().parents[1]
    assert (root / ".env.example").read_text() == env_example(declarations()), (
        "run scripts/gen_docs.py")
    page = (root / "docs" / "settings.md").read_text()
    assert settings_table(declarations()) in page, "run scripts/gen_docs.py"


def test_every_setting_says_when_a_user_would_change_it() -> None:
    page = (Path(__file__).resolve().parents[1] / "docs" / "settings.md").read_text()
    told = page.split("<!-- settings:end -->", 1)[1]
    for entry in declarations():
        assert f"`{entry.setting.env}`" in told, entry.setting.env


def test_a_child_gets_every_setting_and_nothing_removed(tmp_path: Path) -> None:
    config = load({"LIBRARY": "notes"}, environ={"SQLITE_PATH": str(tmp_path / "i.db")})
    env = child_environment(config)
    assert env["LIBRARY"] == "notes" and env["SQLITE_PATH"] == str(tmp_path / "i.db")
    assert not set(REMOVED) & (set(env) - set(os.environ))


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.20", "::", "notes.lan"])
def test_listening_beyond_loopback_without_a_token_is_refused(host: str) -> None:
    with pytest.raises(ConfigError, match="POCKETMCP_TOKEN"):
        load({"MCP_TRANSPORT": "http", "MCP_HOST": host}, environ={})
    config = load({"MCP_TRANSPORT": "http", "MCP_HOST": host},
                  environ={"POCKETMCP_TOKEN": "s3cret-x"})
    assert config.serve.token is not None and config.serve.token.reveal() == "s3cret-x"
    assert load({"MCP_HOST": host}, environ={}).serve.transport == "stdio"  # listens nowhere


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "localhost", "::1", "[::1]"])
def test_loopback_addresses_need_no_token(host: str) -> None:
    assert load({"MCP_TRANSPORT": "http", "MCP_HOST": host}, environ={}).serve.token is None


def test_the_token_never_shows_in_a_repr_or_an_error() -> None:
    config = load({}, environ={"POCKETMCP_TOKEN": "s3cret-value"})
    assert "s3cret-value" not in repr(config) and "s3cret-value" not in repr(config.serve.token)
    with pytest.raises(TypeError, match="reveal"):
        f"Bearer {config.serve.token}"  # sending the masked form is refused
    with pytest.raises(ConfigError) as refused:
        load({}, environ={"POCKETMCP_TOKEN": "two words-s3cret"})
    assert "s3cret" not in str(refused.value)


def test_remote_providers_get_their_own_batch_defaults_and_the_key_from_the_named_variable(
) -> None:
    local = load({}, environ={"OPENAI_API_KEY": "sk-1"})
    assert (local.embed.batch_size, local.embed.batch_tokens) == (1, 4096)
    remote = load({}, environ={"EMBED_PROVIDER": "openai", "OPENAI_API_KEY": "sk-1"})
    assert (remote.embed.batch_size, remote.embed.batch_tokens) == (100, 100_000)
    assert remote.embed.api_key is not None and remote.embed.api_key.reveal() == "sk-1"
    assert "sk-1" not in repr(remote) and "sk-1" not in str(remote.embed.api_key)
    named = load({"EMBED_API_KEY_ENV": "VLLM_KEY"},
                 environ={"EMBED_PROVIDER": "openai", "VLLM_KEY": "v-2", "OPENAI_API_KEY": "x"})
    assert named.embed.api_key is not None and named.embed.api_key.reveal() == "v-2"
    ollama = load({}, environ={"EMBED_PROVIDER": "ollama", "OPENAI_API_KEY": "sk-1"})
    assert ollama.embed.api_key is None  # not sent to Ollama unless a variable is named


def test_prefixes_keep_their_spaces_and_none_means_no_prefix() -> None:
    config = load({}, environ={"EMBED_DOC_PREFIX": "search_document: ",
                               "EMBED_QUERY_PREFIX": "None"})
    assert (config.embed.doc_prefix, config.embed.query_prefix) == ("search_document: ", "")
    assert load({}, environ={"EMBED_DOC_PREFIX": ""}).embed.doc_prefix is None


@pytest.mark.parametrize(("env", "variable"), [
    ({"EMBED_PROVIDER": "cohere"}, "EMBED_PROVIDER"),
    ({"EMBED_BASE_URL": "localhost:11434"}, "EMBED_BASE_URL"),
    ({"SEARCH_TIMEOUT_S": "0"}, "SEARCH_TIMEOUT_S"),
    ({"SEARCH_TIMEOUT_S": "nan"}, "SEARCH_TIMEOUT_S"),
    ({"EMBED_API_KEY_ENV": "MY-KEY"}, "EMBED_API_KEY_ENV"),
    ({"EMBED_CONCURRENCY": "5000"}, "EMBED_CONCURRENCY"),
])
def test_bad_provider_settings_name_the_variable(env, variable) -> None:
    with pytest.raises(ConfigError) as caught:
        load({}, environ=env)
    assert caught.value.variable == variable


@pytest.mark.parametrize("schema", ["team_db_notes", "team_db", "x_db_y_z"])
def test_a_pg_schema_that_could_be_another_ones_named_database_is_refused(schema) -> None:
    # Named database `notes` of PG_SCHEMA=team is schema team_db_notes; database `db_z` of
    # PG_SCHEMA=x is x_db_db_z, as database `z` of PG_SCHEMA=x_db would be.
    with pytest.raises(ConfigError, match="_db_") as caught:
        load({}, environ={"PG_SCHEMA": schema})
    assert caught.value.variable == "PG_SCHEMA"
    for fine in ("team", "team_dbx", "db_team", "team_db2"):
        assert load({}, environ={"PG_SCHEMA": fine}).store.pg_schema == fine


def test_the_hnsw_graph_of_a_new_postgres_index_is_one_pgvector_accepts() -> None:
    config = load({}, environ={"PG_HNSW_M": "24", "PG_HNSW_EF_CONSTRUCTION": "128"})
    assert (config.store.pg_hnsw_m, config.store.pg_hnsw_ef_construction) == (16, 64)
    place = load({}, environ={"STORE": "postgres", "DATABASE_URL": "postgresql://u@h/db",
                              "PG_HNSW_M": "32", "PG_HNSW_EF_CONSTRUCTION": "48"}).main_place()
    assert (place.hnsw_m, place.hnsw_ef_construction) == (16, 64)  # type: ignore[attr-defined]
    assert place.hnsw_ef_construction >= 2 * place.hnsw_m  # type: ignore[attr-defined]


def test_a_removed_variable_still_set_is_named_once_in_the_log(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from pocketmcp import cli
    from pocketmcp.settings import REMOVED as NO_LONGER_READ

    assert set(NO_LONGER_READ) == set(REMOVED)  # every variable this file says is gone
    (tmp_path / "notes").mkdir()
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("EMBED_TIMEOUT_S", "300")
    monkeypatch.setenv("DATABASES_DIR", str(tmp_path / "dbs"))
    before, root = structlog.get_config(), logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        assert cli.main(["init", str(tmp_path / "notes"), "--print"]) == 0
    finally:  # the suite's logging as it was (the command configured its own)
        structlog.configure(**before)
        root.handlers[:] = handlers
        root.setLevel(level)
        logging.captureWarnings(False)
    out, err = capsys.readouterr()
    warned = [json.loads(line) for line in err.splitlines() if "setting_removed" in line]
    assert sorted(w["variable"] for w in warned) == ["DATABASES_DIR", "EMBED_TIMEOUT_S"]
    assert "setting_removed" not in out  # stdout is the command's own
