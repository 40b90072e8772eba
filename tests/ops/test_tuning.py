"""An index's kept fusion weight is used by its searches wherever its file is named from,
and looking for it costs a search no system call most of the time."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from support.cli import run_cli

from pocketmcp.ops import tuning
from pocketmcp.ops.ranking import DEFAULT_PARAMS

NOTES = {
    "tax.md": "# Tax\n\nThe self employed tax return is due by the end of January.\n",
    "bread.md": "# Bread\n\nSourdough needs a starter fed the day before baking.\n",
    "bikes.md": "# Bikes\n\nA chain wants oil after a wet ride.\n",
}


@pytest.mark.usefixtures("processes")
def test_a_relative_index_path_uses_the_kept_weight(tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    kb.mkdir()
    for name, text in NOTES.items():
        (kb / name).write_text(text, encoding="utf-8")
    relative = {"SQLITE_PATH": "idx/index.db"}  # run_cli runs in tmp_path
    assert run_cli(tmp_path, "index", env=relative).returncode == 0
    # All of the weight on meaning: hybrid scores are then the vector scores.
    (tmp_path / "idx" / "index.db.search.json").write_text(json.dumps({"vector_weight": 1.0}))

    def top(mode: str) -> dict[str, Any]:
        out = run_cli(tmp_path, "search", "when is the self employed tax return due",
                      "--mode", mode, "--json", "--local", env=relative)
        assert out.returncode == 0, out.stderr
        hit: dict[str, Any] = json.loads(out.stdout)["hits"][0]
        return hit

    hybrid, vector = top("hybrid"), top("vector")
    assert hybrid["chunk_id"] == vector["chunk_id"]
    assert hybrid["score"] == vector["score"], (hybrid, vector)


class _Index:
    def __init__(self, file: Path | None) -> None:
        self.file = file


def test_the_tuning_file_is_looked_at_once_a_second_at_most(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    index_file = tmp_path / "index.db"
    kept = tmp_path / "index.db.search.json"
    kept.write_text(json.dumps({"vector_weight": 0.9}))
    stats: list[str] = []
    real_stat = os.stat

    def counted(path: Any, *args: Any, **kw: Any) -> os.stat_result:
        stats.append(str(path))
        return real_stat(path, *args, **kw)

    clock = [1000.0]
    monkeypatch.setattr(tuning.os, "stat", counted)
    monkeypatch.setattr(tuning.time, "monotonic", lambda: clock[0])
    index: Any = _Index(index_file)
    assert tuning.params_of(index).vector_weight == 0.9
    for _ in range(50):
        assert tuning.params_of(index).vector_weight == 0.9
    assert stats == [str(kept)]
    kept.write_text(json.dumps({"vector_weight": 0.3}))
    os.utime(kept, ns=(1, 1))  # a change the mtime shows
    assert tuning.params_of(index).vector_weight == 0.9  # within the second
    clock[0] += tuning.RECHECK_S
    assert tuning.params_of(index).vector_weight == 0.3
    assert len(stats) == 2
    assert tuning.params_of(_Index(None)) is DEFAULT_PARAMS  # type: ignore[arg-type]
    assert len(stats) == 2
