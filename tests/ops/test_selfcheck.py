"""Search measured on the index's own documents, with no labels: questions from titles,
front matter titles and aliases, headings and first sentences; from the CLI
(`check-search`, which can keep the best fusion weight for the index) and the status tool."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.cli import run_cli
from support.tools import Tools

from pocketmcp.commands.evaluating import counted
from pocketmcp.ops.selfcheck import questions_of

NOTE = """---
title: Brewing green tea at home
aliases: [tea steeping guide]
---

# Brewing green tea at home

Green tea turns bitter when the water is boiling. Use water at about 80 degrees.

## Overview

Short.

## How long to steep the leaves

Two minutes for most green teas.
"""

TOPICS = {
    "tea.md": NOTE,
    "bikes.md": "# Fixing a flat bicycle tyre\n\nLever the tyre off the rim and find the hole "
                "in the inner tube.\n\n## Patching the inner tube\n\nRoughen the rubber, add "
                "glue, press the patch on.\n",
    "bread.md": "# Baking sourdough bread\n\nA wild yeast starter leavens the dough overnight."
                "\n\n## Shaping the loaf before the final rise\n\nFold the dough into a tight "
                "ball.\n",
    "taxes.md": "# Filing the yearly tax return\n\nCollect the receipts for deductible "
                "expenses first.\n\n## Deadlines for self employed people\n\nThe return is "
                "due by the end of July.\n",
    "stars.md": "# Watching meteor showers\n\nFind a dark place far from city lights after "
                "midnight.\n\n## Which months have the brightest showers\n\nAugust and "
                "December.\n",
}


def test_a_note_gives_questions_from_what_names_it() -> None:
    props = json.dumps({"title": "Brewing green tea at home",
                        "aliases": ["tea steeping guide"]})
    found = {(q.kind, q.text) for q in questions_of(1, "Brewing green tea at home", props,
                                                    NOTE)}
    assert ("title", "Brewing green tea at home") in found
    assert ("alias", "tea steeping guide") in found
    assert ("heading", "How long to steep the leaves") in found
    assert ("sentence", "Green tea turns bitter when the water is boiling.") in found
    # one-word and generic headings name nothing in particular; no text twice
    assert not any(text == "Overview" for _, text in found)
    assert len(found) == 4


def test_the_kinds_of_questions_are_counted_in_words() -> None:
    assert [counted(n, k) for n, k in ((1, "alias"), (3, "alias"), (2, "title"),
                                       (1, "heading"))] == [
        "1 alias", "3 aliases", "2 titles", "1 heading"]


@pytest.mark.usefixtures("processes")
def test_check_search_measures_each_mode_and_keeps_the_best_weight(tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    kb.mkdir()
    for name, text in TOPICS.items():
        (kb / name).write_text(text, encoding="utf-8")
    assert run_cli(tmp_path, "index").returncode == 0
    done = run_cli(tmp_path, "check-search", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["documents"] == len(TOPICS)
    assert report["questions"] >= 2 * len(TOPICS)
    assert set(report["modes"]) == {"hybrid", "vector", "keyword"}
    # Five unrelated notes: every question finds its note among the first five.
    assert report["modes"]["hybrid"]["hit5"] == 1.0
    assert 0.5 <= report["modes"]["hybrid"]["mrr10"] <= 1.0
    assert len(report["hybrid_by_weight"]) == 7
    tuning = tmp_path / "idx" / "index.db.search.json"
    applied = run_cli(tmp_path, "check-search", "--apply")
    assert applied.returncode == 0, applied.stderr
    assert "documents ranked by their whole document for words" in applied.stdout
    if report["weight_suggested"] != report["weight_in_use"]:
        assert json.loads(tuning.read_text()) == {"vector_weight": report["weight_suggested"]}
        assert "kept for this index" in applied.stdout
    else:
        assert not tuning.exists()
        assert "is the best here" in applied.stdout
    # Whatever was kept, a weight given by hand is then the one in use.
    tuning.write_text(json.dumps({"vector_weight": 0.8}))
    again = json.loads(run_cli(tmp_path, "check-search", "--json").stdout)
    assert again["weight_in_use"] == 0.8
    assert again["modes"]["hybrid"] == again["hybrid_by_weight"]["0.8"]
    # Searches of the index use its weight: all of it on meaning, hybrid scores are the
    # vector scores.
    tuning.write_text(json.dumps({"vector_weight": 1.0}))

    def top(mode: str) -> dict[str, float]:
        out = run_cli(tmp_path, "search", "when is the self employed tax return due",
                      "--mode", mode, "--json", "--local")
        assert out.returncode == 0, out.stderr
        hit: dict[str, float] = json.loads(out.stdout)["hits"][0]
        return hit

    hybrid, vector = top("hybrid"), top("vector")
    assert hybrid["chunk_id"] == vector["chunk_id"]
    assert hybrid["score"] == vector["score"]
    assert hybrid["keyword_score"] is not None  # the words matched, and weighed nothing


async def test_the_status_tool_can_check_search(tools: Tools) -> None:
    await tools.add(*((name, text) for name, text in TOPICS.items()))
    plain = await tools("status")
    assert plain.get("search_check") is None
    checked = (await tools("status", check_search=True))["search_check"]
    assert checked["questions"] >= len(TOPICS)
    assert checked["modes"]["hybrid"]["hit5"] == 1.0
    assert checked["weight_in_use"] == 0.5
    # Which rule ranks this index's documents by their words, from its shape: short notes.
    assert checked["rule"].startswith("documents ranked by their whole document for words (")
    assert checked["rule"].endswith(" chunks per document < 6)")


@pytest.mark.usefixtures("processes")
def test_check_search_says_what_it_cannot_measure_and_keeps_nothing(tmp_path: Path) -> None:
    """An empty index gives no questions: said, with a code, exit 1. Chunks written for
    keywords alone are counted, no weight is suggested, and --apply is refused until their
    vectors are in."""
    kb = tmp_path / "kb"
    kb.mkdir()
    assert run_cli(tmp_path, "index").returncode == 0
    empty = run_cli(tmp_path, "check-search")
    assert empty.returncode == 1, empty.stdout
    assert "TOO_FEW_QUESTIONS" in empty.stderr and "0 questions" in empty.stderr
    assert "| hybrid |" not in empty.stdout
    for name, text in TOPICS.items():
        (kb / name).write_text(text, encoding="utf-8")
    assert run_cli(tmp_path, "index", "--keywords-first").returncode == 0
    report = json.loads(run_cli(tmp_path, "check-search", "--json").stdout)
    assert report["chunks_waiting"] > 0
    said = run_cli(tmp_path, "check-search")
    assert f"{report['chunks_waiting']} chunks wait for their vectors" in said.stdout
    assert "--apply" not in said.stdout and "does best" not in said.stdout
    tuning = tmp_path / "idx" / "index.db.search.json"
    refused = run_cli(tmp_path, "check-search", "--apply")
    assert refused.returncode == 1 and "NOT_READY" in refused.stderr, refused.stderr
    assert not tuning.exists()
    assert run_cli(tmp_path, "index").returncode == 0
    done = json.loads(run_cli(tmp_path, "check-search", "--json").stdout)
    assert done["chunks_waiting"] == 0 and done["questions"] >= 10
