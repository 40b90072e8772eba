from __future__ import annotations

from pathlib import Path

import pytest

from pocketmcp.config import load
from pocketmcp.errors import ConfigError
from pocketmcp.indexes import index_for
from pocketmcp.settings import SETTINGS, env_example, settings_table


def test_defaults_match_the_documented_values() -> None:
    config = load({}, environ={})
    assert config.sqlite_path == index_for(Path.cwd())  # no ./kb here: this folder's
    assert not config.sqlite_path_given
    assert config.databases_dir == config.sqlite_path.parent / "databases"
    assert config.watch_dir == Path("kb")
    assert (config.chunk_size, config.chunk_overlap) == (1000, 120)
    assert config.debounce_ms == 600
    assert config.read_concurrency == 3
    assert config.include[:2] == ("**/*.md", "**/*.markdown")
    assert {"**/*.pdf", "**/*.docx", "**/*.html", "**/*.txt"} <= set(config.include)
    assert config.model_path is None
    assert (config.default_library, config.library_from) == ("default", "folder")
    assert (config.convert_timeout_s, config.convert_memory_mb) == (60, 1024)


def test_watched_files_map_to_libraries_by_top_folder() -> None:
    watched = load({}, environ={"DEFAULT_LIBRARY": "notes"}).watched()
    assert watched.library_of("papers/2024/a.pdf") == "papers"
    assert watched.library_of("todo.md") == "notes"
    flat = load({}, environ={"LIBRARY_FROM": "none"}).watched()
    assert flat.library_of("papers/a.pdf") == "default"


def test_flags_override_the_environment() -> None:
    config = load({"chunk_size": "500"}, environ={"CHUNK_SIZE": "800", "CHUNK_OVERLAP": "50"})
    assert config.chunk_size == 500
    assert config.chunk_overlap == 50


@pytest.mark.parametrize(
    ("env", "variable"),
    [
        ({"CHUNK_SIZE": "big"}, "CHUNK_SIZE"),
        ({"CHUNK_SIZE": "5"}, "CHUNK_SIZE"),
        ({"QUEUE_SIZE": "1000"}, "QUEUE_SIZE"),
        ({"LOG_LEVEL": "loud"}, "LOG_LEVEL"),
        ({"CHUNK_SIZE": "200", "CHUNK_OVERLAP": "300"}, "CHUNK_OVERLAP"),
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
        load({"read_concurrency": "0"}, environ={})


def test_env_example_lists_every_setting() -> None:
    text = env_example()
    for setting in SETTINGS:
        assert f"\n{setting.env}=" in text


def test_the_committed_env_example_and_settings_page_are_current() -> None:
    root = Path(__file__).resolve().parents[1]
    assert (root / ".env.example").read_text() == env_example(), "run scripts/gen_docs.py"
    page = (root / "docs" / "settings.md").read_text()
    assert settings_table() in page, "run scripts/gen_docs.py"


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.20", "::", "notes.lan"])
def test_listening_beyond_loopback_without_a_token_is_refused(host: str) -> None:
    with pytest.raises(ConfigError, match="POCKETMCP_TOKEN"):
        load({"transport": "http", "host": host}, environ={})
    config = load({"transport": "http", "host": host}, environ={"POCKETMCP_TOKEN": "s3cret-x"})
    assert config.token is not None and config.token.reveal() == "s3cret-x"
    assert load({"host": host}, environ={}).transport == "stdio"  # stdio listens nowhere


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "localhost", "::1", "[::1]"])
def test_loopback_addresses_need_no_token(host: str) -> None:
    assert load({"transport": "http", "host": host}, environ={}).token is None


def test_the_token_never_shows_in_a_repr_or_an_error() -> None:
    config = load({}, environ={"POCKETMCP_TOKEN": "s3cret-value"})
    assert "s3cret-value" not in repr(config) and "s3cret-value" not in repr(config.token)
    with pytest.raises(TypeError, match="reveal"):
        f"Bearer {config.token}"  # sending the masked form is refused
    with pytest.raises(ConfigError) as refused:
        load({}, environ={"POCKETMCP_TOKEN": "two words-s3cret"})
    assert "s3cret" not in str(refused.value)
def test_remote_providers_get_their_own_batch_defaults_and_the_key_from_the_named_variable(
) -> None:
    local = load({}, environ={"OPENAI_API_KEY": "sk-1"})
    assert (local.embed_batch_size, local.embed_batch_tokens) == (1, 4096)
    remote = load({}, environ={"EMBED_PROVIDER": "openai", "OPENAI_API_KEY": "sk-1"})
    assert (remote.embed_batch_size, remote.embed_batch_tokens) == (100, 100_000)
    assert remote.embed_api_key is not None and remote.embed_api_key.reveal() == "sk-1"
    assert "sk-1" not in repr(remote) and "sk-1" not in str(remote.embed_api_key)
    named = load({"embed_api_key_env": "VLLM_KEY"},
                 environ={"EMBED_PROVIDER": "openai", "VLLM_KEY": "v-2", "OPENAI_API_KEY": "x"})
    assert named.embed_api_key is not None and named.embed_api_key.reveal() == "v-2"
    ollama = load({}, environ={"EMBED_PROVIDER": "ollama", "OPENAI_API_KEY": "sk-1"})
    assert ollama.embed_api_key is None  # not sent to Ollama unless a variable is named


def test_prefixes_keep_their_spaces_and_none_means_no_prefix() -> None:
    config = load({}, environ={"EMBED_DOC_PREFIX": "search_document: ",
                               "EMBED_QUERY_PREFIX": "None"})
    assert (config.embed_doc_prefix, config.embed_query_prefix) == ("search_document: ", "")
    assert load({}, environ={"EMBED_DOC_PREFIX": ""}).embed_doc_prefix is None


@pytest.mark.parametrize(("env", "variable"), [
    ({"EMBED_PROVIDER": "cohere"}, "EMBED_PROVIDER"),
    ({"EMBED_BASE_URL": "localhost:11434"}, "EMBED_BASE_URL"),
    ({"EMBED_TIMEOUT_S": "0"}, "EMBED_TIMEOUT_S"),
    ({"EMBED_TIMEOUT_S": "nan"}, "EMBED_TIMEOUT_S"),
    ({"EMBED_API_KEY_ENV": "MY-KEY"}, "EMBED_API_KEY_ENV"),
    ({"EMBED_BATCH_SIZE": "5000"}, "EMBED_BATCH_SIZE"),
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
        assert load({}, environ={"PG_SCHEMA": fine}).pg_schema == fine


def test_an_hnsw_graph_pgvector_would_refuse_is_refused_at_start() -> None:
    config = load({}, environ={"PG_HNSW_M": "24", "PG_HNSW_EF_CONSTRUCTION": "128"})
    assert (config.pg_hnsw_m, config.pg_hnsw_ef_construction) == (24, 128)
    with pytest.raises(ConfigError, match="at least twice PG_HNSW_M") as caught:
        load({}, environ={"PG_HNSW_M": "32", "PG_HNSW_EF_CONSTRUCTION": "48"})
    assert caught.value.variable == "PG_HNSW_EF_CONSTRUCTION"
