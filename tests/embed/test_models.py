"""Where the bundled model is assembled, that starting many processes at once is safe, and
which model EMBED_MODEL names."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pocketmcp.config import load
from pocketmcp.embed.models import ModelSpec, bundled_model_dir, folder_tokenizer
from pocketmcp.embed.settings import DEFAULT_MODEL_ID
from pocketmcp.errors import EmbeddingError


def test_the_model_folder_is_assembled_once_and_then_reused(tmp_path: Path) -> None:
    first = bundled_model_dir(tmp_path)
    stamp = (first / "pocketmcp.json").stat().st_mtime_ns
    assert bundled_model_dir(tmp_path) == first
    assert (first / "pocketmcp.json").stat().st_mtime_ns == stamp  # nothing written again
    assert json.loads((first / "tokenizer_config.json").read_text())["model_max_length"] == 256
    assert (first / "model.onnx").resolve().is_file()


@pytest.mark.usefixtures("processes")
def test_processes_assembling_the_folder_at_once_all_load_the_model(tmp_path: Path) -> None:
    code = ("import sys; from pathlib import Path; from pocketmcp.embed.models import "
            "bundled_model_dir; from tokenizers import Tokenizer; import json; "
            "d = bundled_model_dir(Path(sys.argv[1])); "
            "json.loads((d / 'tokenizer_config.json').read_text()); "
            "Tokenizer.from_file(str(d / 'tokenizer.json')); print('ok')")
    runs = [subprocess.Popen([sys.executable, "-c", code, str(tmp_path)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for _ in range(6)]
    outcomes = [run.communicate(timeout=120) for run in runs]
    assert all(out.strip() == "ok" for out, _ in outcomes), [err[-300:] for _, err in outcomes]


def test_the_folder_tokenizer_is_set_up_as_fastembed_sets_it_up(tmp_path: Path) -> None:
    from fastembed.common.preprocessor_utils import load_tokenizer

    folder = bundled_model_dir(tmp_path)
    assert folder_tokenizer(folder).to_str() == load_tokenizer(folder)[0].to_str()


def test_a_folder_named_after_its_model_is_that_model(tmp_path: Path) -> None:
    """EMBED_MODEL may name a folder of a fastembed-format model (what MODEL_PATH was): the
    folder's name says which model it holds."""
    folder = tmp_path / "models" / "all-MiniLM-L6-v2"
    shutil.copytree(bundled_model_dir(tmp_path / "cache"), folder, symlinks=True)
    spec = ModelSpec(load({"EMBED_MODEL": str(folder)}, environ={}).embed)
    assert (spec.model_id, spec.path, spec.dim) == (DEFAULT_MODEL_ID, folder, 384)
    named = ModelSpec(load({}, environ={"XDG_CACHE_HOME": str(tmp_path / "cache")}).embed)
    assert named.model_id == DEFAULT_MODEL_ID and named.path != folder  # the bundled one
    empty = tmp_path / "empty" / "all-MiniLM-L6-v2"
    empty.mkdir(parents=True)
    with pytest.raises(EmbeddingError, match=r"EMBED_MODEL=.* has no tokenizer.json"):
        ModelSpec(load({"EMBED_MODEL": str(empty)}, environ={}).embed)
