"""Markup that is not content stays out of section paths, embeddings and keywords."""

from __future__ import annotations

import pytest

from pocketmcp.core.markdown import clean, front_matter_end, heading_text


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("Install { #install }", "Install"),
        ("Dependencies ### {: #target-dependencies }", "Dependencies"),
        ("Name (*required*) ## {: #name }", "Name (*required*)"),
        ("Setup {: .note #setup data-x=\"1 2\" }", "Setup"),
        ("Options <!-- hidden -->", "Options"),
        ("C# and F#", "C# and F#"),
        ("The {args} placeholder", "The {args} placeholder"),
    ],
)
def test_heading_text_drops_attribute_lists_comments_and_closing_hashes(raw, expected) -> None:
    assert heading_text(raw) == expected


def test_clean_removes_attribute_lists_comments_and_front_matter() -> None:
    text = ("---\ntitle: Notes\ntags: [a]\n---\n# Guide { #guide }\n\nIntro.\n<!-- more -->\n"
            "![logo](logo.svg){ role=\"img\" loading=lazy }\n\n{: .note }\n\n"
            "Use `{args}` and `{ return x }` as they are.\n")
    out = clean(text)
    assert "title: Notes" not in out and "<!--" not in out
    assert "{ #guide }" not in out and "role=" not in out and "{: .note }" not in out
    assert "![logo](logo.svg)" in out
    assert "`{args}`" in out and "`{ return x }`" in out


def test_text_without_markup_is_returned_unchanged() -> None:
    text = "Plain words. A --- rule in the middle is not front matter.\n"
    assert clean(text) is text


def test_front_matter_ends_after_its_closing_fence() -> None:
    assert front_matter_end("---\na: 1\n---\nBody") == len("---\na: 1\n---\n")
    assert front_matter_end("Body\n---\na: 1\n---\n") == 0
    assert front_matter_end("---\nnever closed\n") == 0
