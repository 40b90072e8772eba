"""What notes say about themselves: front matter, tags, links, titles and dates."""

from __future__ import annotations

import datetime as dt

import pytest

from pocketmcp.convert import kinds
from pocketmcp.core import dates
from pocketmcp.core.notes import (
    TEXT_SUFFIXES,
    converted_facts,
    doc_keys,
    inline_tags,
    links,
    parse_front_matter,
    read_note,
    split_front_matter,
)

NOTE = """---
title: Apollo plan
tags: [project/apollo, Draft]
date: 2024-03-01
updated: 2024-03-05T10:00:00+01:00
aliases: [Moon plan]
priority: 2
---
# Launch

We decided to #ship on Friday. See [[Budget#Q2|the budget]], ![[Diagram]] and
[the risks](../risks/List.md "risks"). Not links: [site](https://example.org),
![photo](img.png), [anchor](#launch).

```python
#include <stdio.h>  # not a tag
[[Not a link]]
```
And `#notatag` in code, issue #42, a URL http://x.org/#frag, and #idea.
"""


def test_front_matter_fields_tags_dates_and_title_are_read() -> None:
    note = read_note(NOTE, folder="notes", modified="2025-01-01T00:00:00.000Z")
    facts = note.facts
    assert note.title == "Apollo plan" and note.problem is None
    assert facts.properties["priority"] == 2
    assert facts.properties["date"] == "2024-03-01"  # YAML dates become ISO strings
    assert facts.tags == ("project/apollo", "Draft", "ship", "idea")
    assert facts.created == "2024-03-01"
    assert facts.modified == "2024-03-05T09:00:00.000Z"  # UTC
    assert NOTE[facts.body_start:].startswith("# Launch")


def test_links_are_wiki_links_and_relative_markdown_links_outside_code() -> None:
    found = links(NOTE, "notes")
    assert [(link.kind, link.target, link.key) for link in found] == [
        ("wiki", "Budget", "budget"), ("wiki", "Diagram", "diagram"),
        ("markdown", "../risks/List.md", "risks/list.md")]


def test_a_note_without_front_matter_dates_falls_back_to_the_file_time() -> None:
    note = read_note("# Groceries\n\nEggs, #shopping", modified="2025-02-03T04:05:06.000Z")
    assert note.title == "Groceries"
    assert note.facts.modified == note.facts.created == "2025-02-03T04:05:06.000Z"
    assert note.facts.tags == ("shopping",) and note.facts.body_start == 0


@pytest.mark.parametrize("block, reason", [
    ("title: [unclosed\n", "not valid YAML (line 3)"),
    ("- a list\n- not a mapping\n", "not a mapping"),
    ("x: !!python/object/apply:os.system ['echo hi']\n", "not valid YAML"),
])
def test_unusable_front_matter_is_reported_and_every_line_stays_in_the_body(
    block: str, reason: str
) -> None:
    text = f"---\n{block}---\n# Body\n\nStill indexed #kept\n"
    note = read_note(text)
    assert note.problem is not None and reason in note.problem
    assert note.facts.properties == {} and note.facts.body_start == 0
    assert note.facts.tags == ("kept",)


def test_only_a_block_at_the_very_start_closed_by_dashes_is_front_matter() -> None:
    assert split_front_matter("Intro\n---\na: 1\n---\n") == (None, 0)
    assert split_front_matter("---\na: 1\nno closing line\n") == (None, 0)
    assert split_front_matter("---\na: 1\n...\nbody") == ("a: 1\n", 13)
    assert parse_front_matter("") == ({}, None)


def test_front_matter_tags_may_be_a_string_and_numbers_are_no_tags() -> None:
    note = read_note("---\ntags: alpha, beta gamma\ntag: '#delta'\n---\n#2024 #x2024 #a/b/\n")
    assert note.facts.tags == ("alpha", "beta", "gamma", "delta", "x2024", "a/b")


def test_tags_ignore_headings_anchors_and_entities() -> None:
    assert inline_tags("# Heading\n## Sub\n[x](#anchor) &#39; a#b (#paren) #ok") == ["ok"]


def test_documents_are_named_by_path_and_file_name_with_and_without_extension() -> None:
    keys = doc_keys("file:Notes/Apollo Plan.md", "file", {"aliases": ["Moon"]})
    assert keys == ("notes/apollo plan.md", "notes/apollo plan", "apollo plan.md",
                    "apollo plan", "moon")
    assert doc_keys("standup-1", "raw", {}) == ("standup-1",)


def test_converted_documents_take_their_dates_from_their_properties() -> None:
    facts = converted_facts({"author": "Ada", "created": "2020-01-01"}, "2024-05-05")
    assert (facts.created, facts.modified) == ("2020-01-01", "2024-05-05")
    assert facts.properties == {"author": "Ada", "created": "2020-01-01"}


def test_the_note_suffixes_are_the_formats_read_as_text() -> None:
    assert set(TEXT_SUFFIXES) == {ext for ext, kind in kinds.KINDS.items()
                                  if kind == kinds.TEXT}


# -- dates -------------------------------------------------------------------------------------

def test_filter_dates_are_iso_or_spans_back_from_now() -> None:
    at = dt.datetime(2024, 3, 10, 12, 0, tzinfo=dt.UTC)
    assert dates.bound("7d", at=at) == "2024-03-03T12:00:00.000Z"
    assert dates.bound("2w", at=at) == "2024-02-25T12:00:00.000Z"
    assert dates.bound("12h", at=at) == "2024-03-10T00:00:00.000Z"
    assert dates.bound("2024-03-01") == "2024-03-01"
    assert dates.bound("2024-03-01T10:00:00+02:00") == "2024-03-01T08:00:00.000Z"
    with pytest.raises(ValueError, match="7d"):
        dates.bound("last tuesday")


def test_a_day_sorts_before_every_moment_of_that_day_and_after_the_day_before() -> None:
    assert "2024-02-29T23:59:59.999Z" < "2024-03-01" < "2024-03-01T00:00:00.000Z"


def test_pdf_dates_are_read_with_their_offset() -> None:
    assert dates.pdf_date("D:20240301093000+01'00'") == "2024-03-01T08:30:00.000Z"
    assert dates.pdf_date("D:20240301") == "2024-03-01"
    assert dates.pdf_date("yesterday") is None
