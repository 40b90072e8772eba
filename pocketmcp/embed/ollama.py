"""POST {base}/api/embed, Ollama's own embedding endpoint.

Ollama's /v1/embeddings (the openai provider) reaches the same models; the native endpoint
reports the tokens it read (`prompt_eval_count`) and cuts inputs longer than the model's
context instead of refusing them (`truncate`). Ollama adds no prefixes itself: the client's
(search_document: / search_query: for nomic-embed-text) are needed.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pocketmcp.embed.base import F32
from pocketmcp.embed.http import Kind
from pocketmcp.embed.openai import error_of


class OllamaApi:
    path = "/api/embed"

    def __init__(self, model: str, *, dimensions: int | None) -> None:
        self.model = model
        self.dimensions = dimensions

    def body(self, texts: list[str], kind: Kind) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "input": texts, "truncate": True}
        if self.dimensions is not None:
            body["dimensions"] = self.dimensions
        return body

    def vectors(self, answer: Any, count: int) -> tuple[F32, int | None]:
        rows = answer["embeddings"]
        if not isinstance(rows, list) or len(rows) != count:
            raise ValueError(f"{count} vectors asked for, "
                             f"{len(rows) if isinstance(rows, list) else 'none'} given")
        if any(not isinstance(row, list) or not row for row in rows):
            raise ValueError("an embedding is not a list of numbers")
        if len({len(row) for row in rows}) > 1:
            raise ValueError("vectors of different lengths in one answer")
        tokens = answer.get("prompt_eval_count")
        return (np.asarray(rows, dtype=np.float32),
                int(tokens) if isinstance(tokens, int) else None)

    def error(self, answer: Any) -> tuple[str, str | None]:
        return error_of(answer)
