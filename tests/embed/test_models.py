"""Where the bundled model is assembled, and that starting many processes at once is safe."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pocketmcp.embed.models import bundled_model_dir, folder_tokenizer


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
