"""Dates said in a query become a filter on the notes' dates, stated in the notice; a query
that only looks like a date is left alone. Checked against a labelled set of dated notes and
questions (tests/data/dated_notes.json) through the search tool on the real model."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from support.tools import Tools

from pocketmcp.core.query_dates import understand
from pocketmcp.search import dated

LABELLED = json.loads((Path(__file__).parents[1] / "data" / "dated_notes.json").read_text())
TODAY = dt.date.fromisoformat(LABELLED["today"])


def _day(text: str | None) -> dt.date | None:
    return None if text is None else dt.date.fromisoformat(text)


@pytest.mark.parametrize("question", LABELLED["questions"], ids=lambda q: q["query"])
def test_each_labelled_question_is_understood_as_labelled(question: dict[str, Any]) -> None:
    span = understand(question["query"], TODAY)
    if question["span"] is None:
        assert span is None
        return
    assert span is not None
    assert span.phrase == question["phrase"]
    assert (span.start, span.end) == tuple(_day(d) for d in question["span"])
    assert question["phrase"] not in span.query


@pytest.mark.parametrize("query", [
    "the 1984 novel", "error 2024 in the log", "in 3 steps", "in the 2nd round",
    "a march for peace", "what happens in 1984", "may I use the mar file", "hier ist alles"])
def test_what_only_looks_like_a_date_is_left_alone(query: str) -> None:
    assert understand(query, TODAY) is None


async def test_the_labelled_questions_find_their_notes_within_the_dates_said(
    tools: Tools, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(dated, "today", lambda: TODAY)
    notes = LABELLED["notes"]
    ids = await tools.add(*((name, f"---\ndate: {day}\n---\n\n{text}\n")
                            for name, (day, text) in notes.items()))
    name_of = {v: k for k, v in ids.items()}
    for question in LABELLED["questions"]:
        reply = await tools("search", query=question["query"], unique_docs=True, top_k=5)
        found = [name_of[m["doc_id"]] for m in reply["matches"]]
        notice = reply.get("notice") or ""
        assert found, question
        if question["first"] is not None:
            assert found[0] == question["first"], (question, found)
        else:
            wanted = question["all"]
            assert sorted(found[:len(wanted)]) == sorted(wanted), (question, found)
        if question["span"] is None:
            assert "dates:" not in notice, (question, notice)
            continue
        assert f"dates: '{question['phrase']}' taken as" in notice, (question, notice)
        if question.get("none_in_span"):
            assert "no document of that time matched" in notice
            continue
        start, end = (_day(d) for d in question["span"])
        for name in found:  # every match lies in the span said
            day = dt.date.fromisoformat(notes[name][0])
            assert (start is None or day >= start) and (end is None or day < end), (
                question, name)


async def test_date_filters_of_the_caller_win_over_dates_in_the_query(
    tools: Tools, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(dated, "today", lambda: TODAY)
    ids = await tools.add(*((name, f"---\ndate: {day}\n---\n\n{text}\n")
                            for name, (day, text) in LABELLED["notes"].items()
                            if name in ("n3", "n4")))
    reply = await tools("search", query="budget review last week", unique_docs=True,
                        score_threshold=0, filter={"created_before": "2025-12-01"})
    assert [m["doc_id"] for m in reply["matches"]] == [ids["n4"]]
    assert "dates:" not in (reply.get("notice") or "")


@pytest.mark.usefixtures("processes")
def test_the_cli_search_reads_dates_in_the_query(tmp_path: Path) -> None:
    from support.cli import run_cli

    today = dated.today()
    last_week = today - dt.timedelta(days=today.weekday() + 4)  # a Thursday of last week
    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "recent.md").write_text(f"---\ndate: {last_week}\n---\n\nBudget review: cut the "
                                  "cloud spend by ten percent.\n", encoding="utf-8")
    (kb / "old.md").write_text("---\ndate: 2020-05-04\n---\n\nBudget review: the cloud "
                               "spend grew over the summer.\n", encoding="utf-8")
    assert run_cli(tmp_path, "index").returncode == 0
    done = run_cli(tmp_path, "search", "budget review last week", "--json", "--local")
    assert done.returncode == 0, done.stderr
    reply = json.loads(done.stdout)
    assert [h["path"] for h in reply["hits"]] == ["recent.md"]
    assert "dates: 'last week' taken as" in reply["notice"]
