"""Markdown markup that is not content: what stays out of section paths, embeddings and
keywords. Pure functions.

- attribute lists (Python-Markdown, kramdown, MkDocs): `## Install { #install }`,
  `### Build ### {: #build }`, `{: .note }`, `![logo](logo.svg){ role="img" }`;
- HTML comments, `<!-- more -->`;
- YAML front matter between `---` fences at the very start of a file.

The stored text keeps them (offsets point into the file as it is); only what is embedded and
indexed for keywords is cleaned.
"""

from __future__ import annotations

import re

# Every repeat is bounded, so each place in a text costs a bounded number of steps: a line
# of a million spaces or braces is cleaned in linear time, not quadratic.
_VALUE = r"""(?:"[^"\n]{0,200}"|'[^'\n]{0,200}'|[^\s{}"']{1,200})"""
_ATTR = rf"(?:[#.][\w:-]{{1,100}}|[\w:-]{{1,100}}={_VALUE})"
# `{ #id .class key=value }` or `{: ... }`: only attribute syntax inside, so code such as
# `{args}` or `{ return x }` is left alone.
ATTR_LIST = re.compile(
    rf"[ \t]{{0,16}}\{{:?[ \t]{{0,16}}{_ATTR}(?:[ \t]{{1,16}}{_ATTR}){{0,32}}[ \t]{{0,16}}\}}")
_EMPTY_ATTR = re.compile(r"\{:[ \t]{0,16}\}")
COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.DOTALL)
_FRONT_MATTER = re.compile(r"\A(?:\ufeff)?---[ \t]*\n.*?\n(?:---|\.\.\.)[ \t]*(?:\n|\Z)",
                           re.DOTALL)
_CLOSING_HASHES = re.compile(r"[ \t]+#+[ \t]*$")
_BLANK_LINES = re.compile(r"\n[ \t]*\n(?:[ \t]*\n)+")


def front_matter_end(text: str) -> int:
    """Where the body starts: after a YAML front matter block at the start, else 0."""
    match = _FRONT_MATTER.match(text)
    return match.end() if match else 0


def heading_text(raw: str) -> str:
    """A heading's words, without attribute lists, comments or closing hashes."""
    text = COMMENT.sub(" ", raw)
    text = _EMPTY_ATTR.sub(" ", ATTR_LIST.sub(" ", text))
    text = _CLOSING_HASHES.sub("", text.rstrip())
    return " ".join(text.split())


def clean(text: str) -> str:
    """The text as it should be embedded and indexed: markup that is not content removed.
    Text without any such markup comes back as it is (the very same string)."""
    if "{" not in text and "<!--" not in text and not text.startswith(("---", "\ufeff---")):
        return text
    out = text[front_matter_end(text):]
    out = COMMENT.sub("", out)
    out = _EMPTY_ATTR.sub("", ATTR_LIST.sub("", out))
    return _BLANK_LINES.sub("\n\n", out)
