from __future__ import annotations

from pathlib import Path

import pytest

from pocketmcp.config import SETTINGS, env_example, load, settings_table
from pocketmcp.errors import ConfigError


def test_defaults_match_the_documented_values() -> None:
    config = load({}, environ={})
    assert config.sqlite_path == Path("data/index.db")
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
    config = load({}, environ={"DEFAULT_LIBRARY": "notes"})
    assert config.library_of("papers/2024/a.pdf") == "papers"
    assert config.library_of("todo.md") == "notes"
    flat = load({}, environ={"LIBRARY_FROM": "none"})
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


def test_the_committed_env_example_and_readme_table_are_current() -> None:
    root = Path(__file__).resolve().parents[1]
    assert (root / ".env.example").read_text() == env_example(), "run scripts/gen_docs.py"
    readme = (root / "README.md").read_text()
    assert settings_table() in readme, "run scripts/gen_docs.py"
