"""The settings of the `pocketmcp` processes a test starts, in one place.

A test that starts processes asks for the `processes` fixture (tests/conftest.py): they embed
through the test provider (support/provider_server.py) with the fake embedder's vectors, over
OpenAI's API on 127.0.0.1, so none of them loads the real model. A handful of end-to-end
tests run the real model in their processes instead (`model_processes`, each named with its
reason in tests/conftest.py). The fixture puts the settings in this process's environment,
which every process started inherits; the harness, which builds its processes' environment
itself, takes them from `embedding_env`. Outside a test (scripts/ and bench/ use the harness
too) processes get the settings of the environment they are started from.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

# The settings that choose the processes' embedder: these and no others.
KEYS = ("EMBED_PROVIDER", "EMBED_BASE_URL", "EMBED_MODEL")

_asked: list[str] = []  # what the running test asked for: "fake" or "model"


def provider_settings(url: str) -> dict[str, str]:
    """The settings of a process that embeds through the test provider at `url`: OpenAI's
    API, a model name the settings know (all-minilm: 384 dimensions, no prefixes)."""
    return {"EMBED_PROVIDER": "openai", "EMBED_BASE_URL": url + "/v1",
            "EMBED_MODEL": "all-minilm"}


@contextmanager
def started(kind: str) -> Iterator[None]:
    """While the block runs, the test may start processes (`kind`: "fake" or "model")."""
    _asked.append(kind)
    try:
        yield
    finally:
        _asked.pop()


def embedding_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The embedding settings of the processes the running test starts, from `environ`
    (this process's environment by default). In a test, fails unless it asked for processes."""
    if not _asked and "PYTEST_CURRENT_TEST" in os.environ:
        raise RuntimeError("a test that starts pocketmcp processes asks for the `processes` "
                           "fixture (or `model_processes`, for the real model)")
    environ = os.environ if environ is None else environ
    return {key: environ[key] for key in KEYS if key in environ}
