"""An index's kept fusion weight is used by its searches, on either store and wherever its
file is named from, and looking for it costs a search no system call most of the time."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import anyio
import pytest
from support.cli import run_cli
from support.runtime import fake, make_config, running

from pocketmcp.plans import INDEXING, READING
from pocketmcp.search import tuning
from pocketmcp.search.fuse import DEFAULT_PARAMS
from pocketmcp.search.run import search

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


async def test_a_kept_weight_is_used_by_the_searches_of_either_store(
        tmp_path: Path, store_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    config = make_config(tmp_path, store_env)
    for name, text in NOTES.items():
        (config.watched.root / name).write_text(text, encoding="utf-8")
    async with running(config, INDEXING, embedding=fake(config)) as rt:
        with anyio.fail_after(60):
            await rt.fed.wait()
    clock = [1000.0]
    monkeypatch.setattr(tuning.time, "monotonic", lambda: clock[0])
    async with running(config, READING, embedding=fake(config)) as rt:
        reading = await rt.reading()
        assert tuning.params_of(reading.index) is DEFAULT_PARAMS  # none kept yet
        kept = tuning.save_weight(reading.index, 1.0)  # all of the weight on meaning
        assert kept == rt.place.beside("search.json") and kept.is_file()
        clock[0] += tuning.RECHECK_S
        assert tuning.params_of(reading.index).vector_weight == 1.0
        question = "when is the self employed tax return due"
        hybrid = (await search(reading, question, mode="hybrid")).matches[0]
        vector = (await search(reading, question, mode="vector")).matches[0]
        assert (hybrid.chunk_id, hybrid.score) == (vector.chunk_id, vector.score)


class _Index:
    def __init__(self, file: Path) -> None:
        self.file = file

    def beside(self, name: str) -> Path:
        return self.file.with_name(f"{self.file.name}.{name}")


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
    none_kept: Any = _Index(tmp_path / "other.db")  # an index that keeps no weight
    assert tuning.params_of(none_kept) is DEFAULT_PARAMS
    assert len(stats) == 3
    for _ in range(50):
        assert tuning.params_of(none_kept) is DEFAULT_PARAMS
    assert len(stats) == 3
