"""A question naming a time ("what did I write this week") keeps every note of that time,
whatever its score, each with the date that placed it there: over a folder of real notes
indexed by the pipeline, through the search tool and the command line."""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest
from support import docs
from support.runtime import fake, make_config, running
from support.tools import Tools

from pocketmcp.core.query_dates import understand
from pocketmcp.plans import Plan
from pocketmcp.runtime import Runtime
from pocketmcp.search import dated

QUERY = "what did I write this week"


def write_week(kb: Path, today: dt.date) -> dict[str, str]:
    """Two files edited today about writing, a note whose front matter says it was created
    on this week's Monday about something else, and an old note: path -> the created date
    each should show."""
    monday = today - dt.timedelta(days=today.weekday())
    notes = {
        "draft.md": "# Draft\n\nI write the draft of the report; writing it took all day.\n",
        "letters.md": "# Letters\n\nWrite the letters to the bank and write to the school.\n",
        "garden.md": f"---\ncreated: {monday.isoformat()}\n---\n# Garden\n\n"
                     "Tomato stakes and basil seedlings on the balcony.\n",
        "old.md": "---\ncreated: 2020-05-04\n---\n# Old\n\nI write old things here.\n",
    }
    for name, text in notes.items():
        (kb / name).write_text(text, encoding="utf-8")
    old = dt.datetime(2020, 5, 4, tzinfo=dt.UTC).timestamp()
    os.utime(kb / "old.md", (old, old))
    return {"garden.md": monday.isoformat()}


@pytest.fixture(params=["sqlite", "postgres"])
async def week(request: pytest.FixtureRequest, tmp_path: Path
               ) -> AsyncIterator[tuple[Runtime, dict[str, str]]]:
    config = make_config(tmp_path, {} if request.param == "sqlite" else {
        "STORE": "postgres", "DATABASE_URL": request.getfixturevalue("pg_url"),
        "PG_SCHEMA": request.getfixturevalue("pg_schema")})
    expected = write_week(config.watched.root, dated.today())
    async with running(config, Plan(feed="scan", keep_serving=True),
                       embedding=fake(config)) as rt:
        assert rt.pipeline is not None
        with anyio.fail_after(60):
            await rt.pipeline.scan_done.wait()
            while (await Tools(rt)("status"))["chunks_waiting"]:  # noqa: ASYNC110 - no event
                await anyio.sleep(0.02)
        yield rt, expected


async def test_every_note_of_the_week_is_kept_whatever_its_score_with_its_date(
        week: tuple[Runtime, dict[str, str]]) -> None:
    rt, expected = week
    tools = Tools(rt)
    # A threshold that the notes about writing pass and the garden note does not.
    reply = await tools("search", query=QUERY, unique_docs=True, score_threshold=0.2)
    by_path = {m["path"]: m for m in reply["matches"]}
    assert set(by_path) == {"draft.md", "letters.md", "garden.md"}, reply
    garden = by_path["garden.md"]
    assert garden["score"] < 0.2, garden  # kept under the threshold: it is of that week
    assert garden["matched_date"] == expected["garden.md"]
    today = dated.today().isoformat()
    for path in ("draft.md", "letters.md"):  # no front matter: created is the last change
        assert by_path[path]["matched_date"] is not None
        assert by_path[path]["matched_date"] == by_path[path]["created"]
    # Ranked among the week's notes: best first, the garden note after those passing.
    scores = [m["score"] for m in reply["matches"]]
    assert scores == sorted(scores, reverse=True)
    assert "dates: 'this week' taken as" in reply["notice"]
    assert "kept" in reply["notice"], reply["notice"]
    assert today >= expected["garden.md"]

    # A strict threshold holds for the week's notes too (the web page's search).
    strict = await tools("search", query=QUERY, unique_docs=True, score_threshold=0.2,
                         strict_threshold=True)
    assert {m["path"] for m in strict["matches"]} == {"draft.md", "letters.md"}
    assert all(m["matched_date"] for m in strict["matches"])

    # A question without a time keeps its threshold, and no match shows a matched date.
    plain = await tools("search", query="what did I write", unique_docs=True,
                        score_threshold=0.2)
    assert "garden.md" not in {m["path"] for m in plain["matches"]}
    assert all(m["matched_date"] is None for m in plain["matches"])


@pytest.mark.parametrize("query", [QUERY, "notes created this week",
                                   "was habe ich diese Woche geschrieben"])
async def test_a_question_of_the_week_with_no_match_over_the_threshold_shows_the_week(
        week: tuple[Runtime, dict[str, str]], query: str) -> None:
    rt, _ = week
    reply = await Tools(rt)("search", query=query, unique_docs=True, score_threshold=0.99)
    assert {m["path"] for m in reply["matches"]} == {"draft.md", "letters.md", "garden.md"}
    assert "no match reached score_threshold 0.99" in reply["notice"], reply["notice"]
    assert "the documents of that time are shown anyway" in reply["notice"], reply["notice"]


async def test_a_note_of_the_week_no_retriever_brings_is_kept_too(
        week: tuple[Runtime, dict[str, str]]) -> None:
    rt, expected = week
    # By keywords, the garden note holds no word of the question: it comes after the
    # others with score 0, with its date.
    reply = await Tools(rt)("search", query=QUERY, mode="keyword", unique_docs=True)
    paths = [m["path"] for m in reply["matches"]]
    assert sorted(paths) == ["draft.md", "garden.md", "letters.md"], reply
    assert paths[-1] == "garden.md"
    garden = reply["matches"][-1]
    assert (garden["score"], garden["matched_date"]) == (0.0, expected["garden.md"])
    assert garden["start_line"] == 4  # its first chunk, past the front matter
    # Never more than top_k.
    one = await Tools(rt)("search", query=QUERY, mode="keyword", unique_docs=True, top_k=1)
    assert len(one["matches"]) == 1


@pytest.mark.parametrize(("query", "asks"), [
    ("notes created last week", True),
    ("files I changed yesterday", True),
    ("which pages did I edit today", True),
    ("meeting notes from last week", True),  # one subject: its best notes of the week
    ("welche Notizen habe ich letzte Woche geschrieben", True),
    ("Dateien die ich gestern geändert habe", True),
    ("qu'est-ce que j'ai écrit la semaine dernière", True),
    ("qué escribí la semana pasada", True),
    ("cosa ho scritto la settimana scorsa", True),
    ("o que escrevi na semana passada", True),
    ("wat heb ik vorige week geschreven", True),
    ("Lisbon trip last week", False),  # a subject: answered from any date when none match
    ("Lisbon trip notes last week", False),
    ("Reise nach Lissabon letzte Woche", False),
    ("voyage à Lisbonne la semaine dernière", False),
])
def test_words_that_ask_for_the_notes_of_a_time_are_no_subject_in_any_language_read(
        query: str, asks: bool) -> None:
    span = understand(query, dt.date(2026, 11, 29))
    assert span is not None, query
    assert dated.asks_for_the_time(span) is asks, dated.terms(span.query)


@pytest.mark.usefixtures("processes")
def test_the_cli_lists_every_note_of_the_week_with_its_date(tmp_path: Path) -> None:
    from support.cli import run_cli

    kb = tmp_path / "kb"
    kb.mkdir()
    expected = write_week(kb, dated.today())
    docs.pdf(kb / "log.pdf", "Observing log", [("One", "Setup of the telescope."),
                                                ("Two", "The quasar flickered twice.")])
    assert run_cli(tmp_path, "index").returncode == 0
    done = run_cli(tmp_path, "search", QUERY, "--json", "--local", "--unique-docs")
    assert done.returncode == 0, done.stderr
    hits = {h["path"]: h for h in json.loads(done.stdout)["hits"]}
    assert set(hits) == {"draft.md", "letters.md", "garden.md"}, hits
    assert hits["garden.md"]["matched_date"] == expected["garden.md"]
    shown = run_cli(tmp_path, "search", QUERY, "--local", "--unique-docs")
    assert shown.returncode == 0, shown.stderr
    garden = next(line for line in shown.stdout.splitlines() if "garden.md" in line)
    assert f"(created {expected['garden.md']})" in garden, shown.stdout
    assert "garden.md:4-6" in garden, shown.stdout  # cited by its lines, past its front matter
    # A PDF's match is cited by its page too.
    found = run_cli(tmp_path, "search", "quasar", "--local", "--mode", "keyword")
    assert found.returncode == 0, found.stderr
    first = found.stdout.splitlines()[0]
    assert "log.pdf:" in first and "(p. 2)" in first, found.stdout


@pytest.mark.parametrize(("query", "phrase", "span"), [
    ("Notizen von letzter Woche", "letzter Woche", ("2026-03-09", "2026-03-16")),
    ("was habe ich letzte Woche geschrieben", "letzte Woche", ("2026-03-09", "2026-03-16")),
    ("Notizen vom letzten Monat", "letzten Monat", ("2026-02-01", "2026-03-01")),
    ("Notizen des letzten Jahres", "letzten Jahres", ("2025-01-01", "2026-01-01")),
    ("Notizen von diesem Jahr", "diesem Jahr", ("2026-01-01", "2027-01-01")),
    ("Notizen dieser Woche", "dieser Woche", ("2026-03-16", "2026-03-23")),
    ("notes de la semaine dernière", "semaine dernière", ("2026-03-09", "2026-03-16")),
    ("notes du mois dernier", "mois dernier", ("2026-02-01", "2026-03-01")),
    ("notas de la semana pasada", "semana pasada", ("2026-03-09", "2026-03-16")),
    ("notas del año pasado", "año pasado", ("2025-01-01", "2026-01-01")),
    ("note della settimana scorsa", "settimana scorsa", ("2026-03-09", "2026-03-16")),
    ("note dell'anno scorso", "anno scorso", ("2025-01-01", "2026-01-01")),
    ("notas da semana passada", "semana passada", ("2026-03-09", "2026-03-16")),
    ("notities van vorige week", "vorige week", ("2026-03-09", "2026-03-16")),
    ("notities van vorig jaar", "vorig jaar", ("2025-01-01", "2026-01-01")),
    ("notities van vorige maand", "vorige maand", ("2026-02-01", "2026-03-01")),
])
def test_inflected_forms_of_the_other_languages_are_read_as_dates(
        query: str, phrase: str, span: tuple[str, str]) -> None:
    found = understand(query, dt.date(2026, 3, 18))
    assert found is not None, query
    assert phrase.lower() in found.phrase.lower(), (query, found.phrase)
    assert (found.start, found.end) == tuple(dt.date.fromisoformat(d) for d in span)
    assert phrase.split()[-1].lower() not in found.query.lower(), found.query
